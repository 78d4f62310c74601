// Package routing owns interest routing between nodes: the routing table of
// what every peer announced (its aggregated subscription filters, shared
// ones as "$share/group/filter"), and the choice, for one message, of the
// nodes it goes to: once to every node with matching non-shared interest,
// and each matching shared group not served on the publisher's node to
// exactly one node with members (round robin over the group's nodes,
// preferring nodes that can be reached). The receiver delivers locally and
// never forwards again: one broker-to-broker hop.
//
// It is a pure core: no I/O, no clock, no goroutines. The cluster layer
// (package cluster) feeds it peers' announcements and sends the targets it
// returns over peer links. A Table is safe for concurrent use: Route runs
// under a read lock on every publish, announcements under the write lock.
// Anything in the cluster layer may import it; it imports only router and
// topic.
package routing

import (
	"slices"
	"sync"

	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/topic"
)

// remoteOptions are the options a peer's interest is indexed with: the
// broker on the receiving node applies its own subscribers' options.
var remoteOptions = router.Options{QoS: 2}

// Target is one node a forwarded message goes to, and what the receiver
// delivers it to: its direct subscribers, and one member of each group.
type Target struct {
	Node   string
	Direct bool
	Groups []string // "$share/group/filter"
}

// Table is the routing table: every peer's announced interest.
type Table struct {
	matches sync.Pool // *router.Matches[string]
	mu      struct {
		sync.RWMutex
		ix      *router.Index[string]
		filters map[string]map[string]struct{} // node -> filters
	}
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{}
	t.matches.New = func() any { return new(router.Matches[string]) }
	t.mu.ix = router.New[string]()
	t.mu.filters = map[string]map[string]struct{}{}
	return t
}

// Announce applies a peer's announcement: with full set, add is the node's
// whole interest and replaces what it announced before; otherwise add and
// remove are changes. It returns the filters it refused as invalid.
func (t *Table) Announce(node string, full bool, add, remove []string) (invalid []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.mu.filters[node]
	if set == nil {
		set = map[string]struct{}{}
		t.mu.filters[node] = set
	}
	if full {
		keep := make(map[string]struct{}, len(add))
		for _, f := range add {
			keep[f] = struct{}{}
		}
		for f := range set {
			if _, ok := keep[f]; !ok {
				t.mu.ix.Unsubscribe(node, f)
				delete(set, f)
			}
		}
	}
	for _, f := range remove {
		if _, ok := set[f]; ok {
			t.mu.ix.Unsubscribe(node, f)
			delete(set, f)
		}
	}
	for _, f := range add {
		if _, ok := set[f]; ok {
			continue
		}
		if _, err := t.mu.ix.Subscribe(node, f, remoteOptions); err != nil {
			invalid = append(invalid, f)
			continue
		}
		set[f] = struct{}{}
	}
	return invalid
}

// Drop forgets everything node announced, so nothing more is routed to it.
func (t *Table) Drop(node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for f := range t.mu.filters[node] {
		t.mu.ix.Unsubscribe(node, f)
	}
	delete(t.mu.filters, node)
}

// Len returns the number of (node, filter) entries.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.mu.ix.Len()
}

// Route appends to dst the nodes a message on topic name goes to: one
// Target per node, direct when the node has matching non-shared interest,
// with every matching shared group that is not in served (groups the
// publisher's node had a member of) assigned to one node with members: from
// the group's round-robin cursor, the first node for which up is true, or
// the cursor's node if none is.
func (t *Table) Route(name string, served []string, up func(node string) bool, dst []Target) []Target {
	ms := t.matches.Get().(*router.Matches[string])
	defer t.matches.Put(ms)
	t.mu.RLock()
	t.mu.ix.Match(name, "", ms)
	t.mu.RUnlock()
	if len(ms.Direct) == 0 && len(ms.Shared) == 0 {
		return dst
	}
	start := len(dst)
	at := func(node string) *Target {
		for i := start; i < len(dst); i++ {
			if dst[i].Node == node {
				return &dst[i]
			}
		}
		dst = append(dst, Target{Node: node})
		return &dst[len(dst)-1]
	}
	for i := range ms.Direct {
		at(ms.Direct[i].Sub).Direct = true
	}
	for i := range ms.Shared {
		g := &ms.Shared[i]
		key := topic.JoinShared(g.Group, g.Filter)
		if slices.Contains(served, key) {
			continue
		}
		if node := pickNode(g, up); node != "" {
			tg := at(node)
			tg.Groups = append(tg.Groups, key)
		}
	}
	return dst
}

// DirectTo reports whether node has non-shared interest matching topic
// name: a message on it published on this node is forwarded there.
func (t *Table) DirectTo(name, node string) bool {
	ms := t.matches.Get().(*router.Matches[string])
	defer t.matches.Put(ms)
	t.mu.RLock()
	t.mu.ix.Match(name, "", ms)
	t.mu.RUnlock()
	return slices.ContainsFunc(ms.Direct, func(d router.Delivery[string]) bool { return d.Sub == node })
}

// pickNode chooses the node that serves a shared group for one message.
func pickNode(g *router.SharedMatch[string], up func(string) bool) string {
	n := len(g.Members)
	if n == 0 {
		return ""
	}
	start := int(g.Start % uint64(n))
	for i := 0; i < n; i++ {
		node := g.Members[(start+i)%n].Sub
		if up(node) {
			return node
		}
	}
	return g.Members[start].Sub
}

// Interest returns the filters each peer has announced, sorted (for the
// admin API and tests).
func (t *Table) Interest() map[string][]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string][]string, len(t.mu.filters))
	for node, set := range t.mu.filters {
		fs := make([]string, 0, len(set))
		for f := range set {
			fs = append(fs, f)
		}
		slices.Sort(fs)
		out[node] = fs
	}
	return out
}
