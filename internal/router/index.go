package router

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sextantmq/sextant/internal/topic"
)

// ErrInvalidOptions reports subscription options the index refuses.
var ErrInvalidOptions = errors.New("router: invalid subscription options")

// Options are one subscription's MQTT options.
type Options struct {
	QoS               byte // maximum QoS, 0 to 2
	NoLocal           bool // do not deliver the subscriber's own publications; not allowed on shared subscriptions
	RetainAsPublished bool
	RetainHandling    byte   // 0 to 2; the index stores it for the caller
	ID                uint32 // subscription identifier; 0 means none
}

// Member is one subscription in a shared group, or one matching non-shared
// subscription.
type Member[S comparable] struct {
	Sub  S
	Opts Options
}

// Index is the subscription trie. The zero value is not usable; call New.
// See the package comment for the concurrency contract.
type Index[S comparable] struct {
	root  node[S]
	subs  int // subscriptions, shared ones included
	nodes int // trie nodes below the root
}

// New returns an empty index.
func New[S comparable]() *Index[S] { return &Index[S]{} }

// Len returns the number of subscriptions in the index, shared subscriptions
// included (one per member per group).
func (ix *Index[S]) Len() int { return ix.subs }

// Subscribe adds sub's subscription to filter, or replaces its options if sub
// already subscribed to that exact filter (MQTT: a new SUBSCRIBE to the same
// filter replaces the old subscription); existed reports the replacement.
// filter may be a shared subscription "$share/{group}/{filter}", which is
// distinct from a subscription to the inner filter alone. An invalid filter
// returns an error wrapping the topic package's sentinel; invalid options
// (QoS or Retain Handling above 2, No Local on a shared subscription) return
// ErrInvalidOptions.
func (ix *Index[S]) Subscribe(sub S, filter string, o Options) (existed bool, err error) {
	if err := topic.ValidateFilter(filter); err != nil {
		return false, fmt.Errorf("router: subscribe: %w", err)
	}
	group, inner, shared, _ := topic.ParseShared(filter)
	switch {
	case o.QoS > 2:
		return false, fmt.Errorf("%w: QoS %d", ErrInvalidOptions, o.QoS)
	case o.RetainHandling > 2:
		return false, fmt.Errorf("%w: retain handling %d", ErrInvalidOptions, o.RetainHandling)
	case shared && o.NoLocal:
		return false, fmt.Errorf("%w: no local on shared subscription %q", ErrInvalidOptions, filter)
	}
	n := ix.insert(inner)
	if shared {
		existed = n.groupFor(group, inner).set(sub, o)
	} else {
		existed = n.setSub(sub, o)
	}
	if !existed {
		ix.subs++
	}
	return existed, nil
}

// Unsubscribe removes sub's subscription to filter (which may be shared) and
// reports whether there was one. Trie nodes left empty are freed.
func (ix *Index[S]) Unsubscribe(sub S, filter string) (existed bool) {
	group, inner, shared, err := topic.ParseShared(filter)
	if err != nil || inner == "" {
		return false
	}
	n := ix.find(inner)
	if n == nil {
		return false
	}
	if shared {
		existed = n.removeMember(group, sub)
	} else {
		existed = n.removeSub(sub)
	}
	if existed {
		ix.subs--
		ix.prune(n)
	}
	return existed
}

// insert returns the node for filter's levels, creating missing nodes. The
// levels of new nodes are cut from one private copy of filter, so the index
// never keeps a caller's buffer alive.
func (ix *Index[S]) insert(filter string) *node[S] {
	n := &ix.root
	owned := false
	for i := 0; ; {
		end := levelEnd(filter, i)
		c := n.child(filter[i:end])
		if c == nil {
			if !owned {
				filter, owned = strings.Clone(filter), true
			}
			c = &node[S]{level: filter[i:end], parent: n}
			n.addChild(c)
			ix.nodes++
		}
		n = c
		if end == len(filter) {
			return n
		}
		i = end + 1
	}
}

// find returns the node for filter's levels, or nil.
func (ix *Index[S]) find(filter string) *node[S] {
	n := &ix.root
	for i := 0; ; {
		end := levelEnd(filter, i)
		if n = n.child(filter[i:end]); n == nil {
			return nil
		}
		if end == len(filter) {
			return n
		}
		i = end + 1
	}
}

// prune frees n and its ancestors while they hold nothing.
func (ix *Index[S]) prune(n *node[S]) {
	for n != &ix.root && n.empty() {
		p := n.parent
		p.removeChild(n)
		n.parent = nil
		ix.nodes--
		n = p
	}
}

// levelEnd returns the index of the '/' ending the level that starts at i,
// or len(s).
func levelEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '/'); j >= 0 {
		return i + j
	}
	return len(s)
}

// Filters calls fn once for every distinct filter in the index with the
// number of subscriptions on it. A shared group is reported as
// "$share/{group}/{filter}" with its number of members. The order is
// unspecified. fn must not modify the index.
func (ix *Index[S]) Filters(fn func(filter string, count int)) {
	ix.root.visit(nil, true, fn)
}

func (n *node[S]) visit(path []byte, root bool, fn func(string, int)) {
	if len(n.subs) > 0 {
		fn(string(path), len(n.subs))
	}
	if n.x != nil {
		for _, g := range n.x.groups {
			fn(topic.JoinShared(g.name, g.filter), len(g.members))
		}
	}
	n.eachChild(func(c *node[S]) {
		p := path
		if !root {
			p = append(p, '/')
		}
		c.visit(append(p, c.level...), false, fn)
	})
}
