package router

import "slices"

// Matches receives the result of Match. Reuse one per goroutine: Match resets
// it and reuses its buffers, so matching allocates nothing once the buffers
// have grown to the largest result seen. The slices are overwritten by the
// next Match with the same Matches.
type Matches[S comparable] struct {
	Direct []Delivery[S]    // one per distinct subscriber with a matching non-shared subscription
	Shared []SharedMatch[S] // one per matching shared group (group and filter)

	raw     []Member[S] // matching non-shared subscriptions, in walk order
	nodes   int         // trie nodes that contributed to raw
	slot    []int32     // delivery index of raw[i]
	off     []int32     // subscription id offsets per delivery
	ids     []uint32    // backing store for Delivery.IDs
	members []Member[S] // backing store for SharedMatch.Members
	memOff  []int32     // Shared[i].Members is members[memOff[i]:memOff[i+1]]
	pos     map[S]int32 // subscriber -> delivery index, while folding
}

// Delivery is one subscriber's share of a message: its matching non-shared
// subscriptions folded into one (MQTT 5 3.3.4).
type Delivery[S comparable] struct {
	Sub               S
	QoS               byte     // the maximum over its matching subscriptions
	RetainAsPublished bool     // set on any of them
	IDs               []uint32 // the non-zero subscription identifiers of all of them
}

// SharedMatch is one shared subscription group whose filter matched. The
// caller delivers to one member, trying them in order from
// Members[Start%len(Members)].
type SharedMatch[S comparable] struct {
	Group, Filter string      // share name and inner filter
	Members       []Member[S] // in the order they joined (a copy)
	Start         uint64      // this group's round-robin cursor; each Match advances it by one
}

func (m *Matches[S]) reset() {
	clear(m.Direct) // drop references to subscribers from the last result
	clear(m.raw)
	clear(m.members)
	m.Direct, m.Shared, m.raw, m.members = m.Direct[:0], m.Shared[:0], m.raw[:0], m.members[:0]
	m.memOff = append(m.memOff[:0], 0)
	m.nodes = 0
}

// Match finds every subscription whose filter matches the topic name and
// writes the result into m. from is the publisher's handle: its own
// subscriptions with No Local do not match (pass the zero S for a publisher
// that holds no subscriptions, such as the broker itself). Filters starting with a wildcard
// do not match names starting with '$'. The name is not validated.
//
// Match may run concurrently with other Match calls (see the package
// comment); each advances the round-robin cursor of every group it returns.
func (ix *Index[S]) Match(name string, from S, m *Matches[S]) {
	m.reset()
	ix.walk(&ix.root, name, 0, topicIsDollar(name), from, m)
	m.fold()
	for i := range m.Shared {
		m.Shared[i].Members = m.members[m.memOff[i]:m.memOff[i+1]:m.memOff[i+1]]
	}
}

func topicIsDollar(name string) bool { return name != "" && name[0] == '$' }

// walk matches the levels of name from byte i (i > len(name): none left)
// against the subtree at n. noWild suppresses n's wildcard children, for the
// root when name starts with '$'.
func (ix *Index[S]) walk(n *node[S], name string, i int, noWild bool, from S, m *Matches[S]) {
	for {
		x := n.x
		if x != nil && x.hash != nil && !noWild {
			m.collect(x.hash, from) // '#' matches the parent and everything below
		}
		if i > len(name) {
			m.collect(n, from)
			return
		}
		end := levelEnd(name, i)
		if x != nil && x.plus != nil && !noWild {
			ix.walk(x.plus, name, end+1, false, from, m)
		}
		if n = n.child(name[i:end]); n == nil {
			return
		}
		i, noWild = end+1, false
	}
}

// collect adds the subscriptions held at n.
func (m *Matches[S]) collect(n *node[S], from S) {
	if len(n.subs) > 0 {
		before := len(m.raw)
		for i := range n.subs {
			e := &n.subs[i]
			if e.opts.NoLocal && e.sub == from {
				continue
			}
			m.raw = append(m.raw, Member[S]{e.sub, e.opts})
		}
		if len(m.raw) > before {
			m.nodes++
		}
	}
	if n.x != nil {
		for _, g := range n.x.groups {
			m.members = append(m.members, g.members...)
			m.memOff = append(m.memOff, int32(len(m.members)))
			m.Shared = append(m.Shared, SharedMatch[S]{Group: g.name, Filter: g.filter, Start: g.next.Add(1) - 1})
		}
	}
}

// posMapKeep bounds the folding map kept between matches; a larger one is
// dropped rather than cleared, so one huge fan-out does not make every later
// clear slow.
const posMapKeep = 4096

// fold turns raw into Direct, one Delivery per subscriber.
func (m *Matches[S]) fold() {
	m.ids = slices.Grow(m.ids[:0], len(m.raw)) // at most one id per subscription: appends below never reallocate
	if m.nodes <= 1 {
		// One filter matched: its subscribers are distinct.
		m.Direct = slices.Grow(m.Direct, len(m.raw))
		for _, r := range m.raw {
			d := Delivery[S]{Sub: r.Sub, QoS: r.Opts.QoS, RetainAsPublished: r.Opts.RetainAsPublished}
			if r.Opts.ID != 0 {
				k := len(m.ids)
				m.ids = append(m.ids, r.Opts.ID)
				d.IDs = m.ids[k : k+1 : k+1]
			}
			m.Direct = append(m.Direct, d)
		}
		return
	}
	if m.pos == nil {
		m.pos = make(map[S]int32)
	}
	m.slot = m.slot[:0]
	for _, r := range m.raw {
		k, ok := m.pos[r.Sub]
		if !ok {
			k = int32(len(m.Direct))
			m.pos[r.Sub] = k
			m.Direct = append(m.Direct, Delivery[S]{Sub: r.Sub, QoS: r.Opts.QoS, RetainAsPublished: r.Opts.RetainAsPublished})
		} else {
			d := &m.Direct[k]
			d.QoS = max(d.QoS, r.Opts.QoS)
			d.RetainAsPublished = d.RetainAsPublished || r.Opts.RetainAsPublished
		}
		m.slot = append(m.slot, k)
	}
	if len(m.pos) > posMapKeep {
		m.pos = nil
	} else {
		clear(m.pos)
	}
	// Lay each delivery's ids out contiguously: count, prefix-sum, place.
	n := len(m.Direct) + 1
	m.off = slices.Grow(m.off[:0], n)[:n]
	clear(m.off)
	total := 0
	for i, r := range m.raw {
		if r.Opts.ID != 0 {
			m.off[m.slot[i]+1]++
			total++
		}
	}
	if total == 0 {
		return
	}
	for k := 1; k < len(m.off); k++ {
		m.off[k] += m.off[k-1]
	}
	m.ids = m.ids[:m.off[len(m.Direct)]]
	for i, r := range m.raw {
		if r.Opts.ID != 0 {
			k := m.slot[i]
			m.ids[m.off[k]] = r.Opts.ID
			m.off[k]++
		}
	}
	// off[k] is now the end of delivery k's ids and the start of k+1's.
	start := int32(0)
	for k := range m.Direct {
		if end := m.off[k]; end > start {
			m.Direct[k].IDs = m.ids[start:end:end]
			start = end
		}
	}
}
