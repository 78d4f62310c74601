package retained

import (
	"strings"
	"sync"

	"github.com/sextantmq/sextant/internal/message"
)

// Children are kept in a slice while there are few, then in a map; back to a
// slice at a lower size so that churn around the threshold does not rebuild
// maps over and over.
const (
	kidMapAt   = 8
	kidSliceAt = 4
)

// Index holds the latest retained message per topic name. The zero value is
// an empty store ready for use.
type Index struct {
	mu struct {
		sync.RWMutex
		root  node
		n     int // messages
		nodes int // trie nodes below the root
	}
}

type node struct {
	level  string
	parent *node
	kids   []*node          // while there are few (kidMapAt)
	kidMap map[string]*node // once there are many
	msg    *message.Message // retained at exactly this name, or nil
}

// Set makes m the retained message for m.Topic, replacing any earlier one,
// and reports whether there was one. A message with an empty payload deletes
// the topic's retained message instead (MQTT 3.3.1.3) and is not stored.
// The store keeps m itself: m must not be modified afterwards (as for every
// message.Message). m.Topic must be a valid topic name.
func (s *Index) Set(m *message.Message) (replaced bool) {
	if len(m.Payload) == 0 {
		return s.Delete(m.Topic)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.insert(m.Topic)
	replaced = n.msg != nil
	n.msg = m
	if !replaced {
		s.mu.n++
	}
	return replaced
}

// SetIf sets (or, with an empty payload, deletes) m's topic only if the
// message currently held there is nil or keep(current) is false, in one
// step under the lock: concurrent updates ordered by a caller's rule (a
// cluster's last-writer-wins stamps) cannot interleave between the check and
// the write. It reports whether m was applied.
func (s *Index) SetIf(m *message.Message, keep func(current *message.Message) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur *message.Message
	if n := s.find(m.Topic); n != nil {
		cur = n.msg
	}
	if cur != nil && keep(cur) {
		return false
	}
	if len(m.Payload) == 0 {
		if cur != nil {
			s.deleteLocked(m.Topic)
		}
		return true
	}
	n := s.insert(m.Topic)
	if n.msg == nil {
		s.mu.n++
	}
	n.msg = m
	return true
}

// Get returns the retained message for the topic name, or nil.
func (s *Index) Get(topic string) *message.Message {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if n := s.find(topic); n != nil {
		return n.msg
	}
	return nil
}

// Delete removes the retained message for the topic name and reports whether
// there was one.
func (s *Index) Delete(topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(topic)
}

func (s *Index) deleteLocked(topic string) bool {
	n := s.find(topic)
	if n == nil || n.msg == nil {
		return false
	}
	n.msg = nil
	s.mu.n--
	// Free the nodes left holding nothing.
	for n != &s.mu.root && n.msg == nil && len(n.kids) == 0 && n.kidMap == nil {
		p := n.parent
		p.removeChild(n)
		n.parent = nil
		s.mu.nodes--
		n = p
	}
	return true
}

// Len returns the number of retained messages.
func (s *Index) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.n
}

// Match calls fn for every retained message whose topic name matches the
// topic filter, until fn returns false. The order is unspecified. The filter
// is not validated, and a shared subscription filter is not unwrapped (MQTT
// sends no retained messages for shared subscriptions). fn runs under the
// index's read lock and must not call the Index.
func (s *Index) Match(filter string, fn func(*message.Message) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	match(&s.mu.root, filter, 0, true, fn)
}

// All calls fn for every retained message until fn returns false, for
// snapshots. The order is unspecified. fn runs under the index's read lock
// and must not call the Index.
func (s *Index) All(fn func(*message.Message) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	all(&s.mu.root, false, fn)
}

// match visits the subtree at n with the filter's levels from byte i
// (i > len(filter): none left). It returns false once fn has.
func match(n *node, filter string, i int, root bool, fn func(*message.Message) bool) bool {
	for {
		if i > len(filter) {
			return n.msg == nil || fn(n.msg)
		}
		end := levelEnd(filter, i)
		switch level := filter[i:end]; level {
		case "#":
			// The parent level and everything below it.
			if n.msg != nil && !fn(n.msg) {
				return false
			}
			return n.eachChild(root, func(c *node) bool { return all(c, false, fn) })
		case "+":
			return n.eachChild(root, func(c *node) bool { return match(c, filter, end+1, false, fn) })
		default:
			if n = n.child(level); n == nil {
				return true
			}
			i, root = end+1, false
		}
	}
}

// all calls fn for every message in the subtree at n, skipping '$' names at
// the root if noDollar.
func all(n *node, noDollar bool, fn func(*message.Message) bool) bool {
	if n.msg != nil && !fn(n.msg) {
		return false
	}
	return n.eachChild(noDollar, func(c *node) bool { return all(c, false, fn) })
}

// eachChild calls fn for n's children until it returns false, skipping
// levels starting with '$' if noDollar.
func (n *node) eachChild(noDollar bool, fn func(*node) bool) bool {
	for _, c := range n.kids {
		if !(noDollar && isDollar(c.level)) && !fn(c) {
			return false
		}
	}
	for _, c := range n.kidMap {
		if !(noDollar && isDollar(c.level)) && !fn(c) {
			return false
		}
	}
	return true
}

func isDollar(level string) bool { return level != "" && level[0] == '$' }

// insert returns the node for name, creating missing nodes. The levels of
// new nodes are cut from one private copy of name.
func (s *Index) insert(name string) *node {
	n := &s.mu.root
	owned := false
	for i := 0; ; {
		end := levelEnd(name, i)
		c := n.child(name[i:end])
		if c == nil {
			if !owned {
				name, owned = strings.Clone(name), true
			}
			c = &node{level: name[i:end], parent: n}
			n.addChild(c)
			s.mu.nodes++
		}
		n = c
		if end == len(name) {
			return n
		}
		i = end + 1
	}
}

func (s *Index) find(name string) *node {
	n := &s.mu.root
	for i := 0; ; {
		end := levelEnd(name, i)
		if n = n.child(name[i:end]); n == nil {
			return nil
		}
		if end == len(name) {
			return n
		}
		i = end + 1
	}
}

func levelEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '/'); j >= 0 {
		return i + j
	}
	return len(s)
}

func (n *node) child(level string) *node {
	if n.kidMap != nil {
		return n.kidMap[level]
	}
	for _, c := range n.kids {
		if c.level == level {
			return c
		}
	}
	return nil
}

func (n *node) addChild(c *node) {
	switch {
	case n.kidMap != nil:
		n.kidMap[c.level] = c
	case len(n.kids) < kidMapAt:
		n.kids = append(n.kids, c)
	default:
		n.kidMap = make(map[string]*node, 2*kidMapAt)
		for _, k := range n.kids {
			n.kidMap[k.level] = k
		}
		n.kidMap[c.level] = c
		n.kids = nil
	}
}

func (n *node) removeChild(c *node) {
	if n.kidMap != nil {
		delete(n.kidMap, c.level)
		if len(n.kidMap) <= kidSliceAt {
			n.kids = make([]*node, 0, len(n.kidMap))
			for _, k := range n.kidMap {
				n.kids = append(n.kids, k)
			}
			n.kidMap = nil
			if len(n.kids) == 0 {
				n.kids = nil
			}
		}
		return
	}
	for i, k := range n.kids {
		if k == c {
			last := len(n.kids) - 1
			n.kids[i] = n.kids[last]
			n.kids[last] = nil
			n.kids = n.kids[:last]
			break
		}
	}
	if len(n.kids) == 0 {
		n.kids = nil
	}
}

// Newer reports whether m, a retained update, wins over an update stamped
// stamp by origin under the cluster's last-writer-wins rule: the later
// hybrid logical stamp wins, and of equal stamps the greater origin node id.
// This is the one place the rule is written: the broker applies it against
// the message it holds, the cluster layer against its deletion tombstones.
func Newer(m *message.Message, stamp uint64, origin string) bool {
	if m.Stamp != stamp {
		return m.Stamp > stamp
	}
	return m.Origin > origin
}
