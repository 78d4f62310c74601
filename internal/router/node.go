package router

import (
	"strings"
	"sync/atomic"
)

// Thresholds for switching between compact and indexed representations.
// Going back happens at a lower size so that churn around a threshold does
// not rebuild maps over and over.
const (
	kidMapAt   = 8  // children: slice up to this many, then a map
	kidSliceAt = 4  // back to a slice at this many
	subIdxAt   = 16 // subscribers on one filter: linear search up to this many, then a map
	subLinAt   = 8  // back to linear search at this many
)

// node is one filter level. Most nodes in a large index are leaves or have a
// single child and no wildcard children, so everything rarely needed lives
// behind x.
type node[S comparable] struct {
	level  string
	parent *node[S]
	kids   []*node[S] // literal children, while there are few (kidMapAt)
	subs   []entry[S] // non-shared subscriptions to this exact filter
	x      *extra[S]
}

type extra[S comparable] struct {
	plus, hash *node[S]            // the "+" and "#" children
	kidMap     map[string]*node[S] // literal children, once there are many
	subIdx     map[S]int32         // position in subs, once there are many
	groups     []*group[S]         // shared subscription groups on this filter
}

type entry[S comparable] struct {
	sub  S
	opts Options
}

// group is one shared subscription group on one filter.
type group[S comparable] struct {
	name, filter string
	members      []Member[S] // in order of first subscription

	next atomic.Uint64 // round-robin cursor, advanced by Match
}

func (n *node[S]) extra() *extra[S] {
	if n.x == nil {
		n.x = &extra[S]{}
	}
	return n.x
}

// tidy drops x once it holds nothing.
func (n *node[S]) tidy() {
	if x := n.x; x != nil && x.plus == nil && x.hash == nil && x.kidMap == nil && x.subIdx == nil && len(x.groups) == 0 {
		n.x = nil
	}
}

func (n *node[S]) empty() bool {
	return len(n.subs) == 0 && len(n.kids) == 0 && n.x == nil
}

func (n *node[S]) child(level string) *node[S] {
	if x := n.x; x != nil {
		switch {
		case level == "+":
			return x.plus
		case level == "#":
			return x.hash
		case x.kidMap != nil:
			return x.kidMap[level]
		}
	}
	for _, c := range n.kids {
		if c.level == level {
			return c
		}
	}
	return nil
}

func (n *node[S]) addChild(c *node[S]) {
	switch {
	case c.level == "+":
		n.extra().plus = c
	case c.level == "#":
		n.extra().hash = c
	case n.x != nil && n.x.kidMap != nil:
		n.x.kidMap[c.level] = c
	case len(n.kids) < kidMapAt:
		n.kids = append(n.kids, c)
	default:
		m := make(map[string]*node[S], 2*kidMapAt)
		for _, k := range n.kids {
			m[k.level] = k
		}
		m[c.level] = c
		n.extra().kidMap = m
		n.kids = nil
	}
}

func (n *node[S]) removeChild(c *node[S]) {
	switch {
	case c.level == "+":
		n.x.plus = nil
	case c.level == "#":
		n.x.hash = nil
	case n.x != nil && n.x.kidMap != nil:
		delete(n.x.kidMap, c.level)
		if len(n.x.kidMap) <= kidSliceAt {
			n.kids = make([]*node[S], 0, kidMapAt)
			for _, k := range n.x.kidMap {
				n.kids = append(n.kids, k)
			}
			n.x.kidMap = nil
		}
	default:
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
	n.tidy()
}

func (n *node[S]) eachChild(fn func(*node[S])) {
	for _, c := range n.kids {
		fn(c)
	}
	if x := n.x; x != nil {
		for _, c := range x.kidMap {
			fn(c)
		}
		if x.plus != nil {
			fn(x.plus)
		}
		if x.hash != nil {
			fn(x.hash)
		}
	}
}

func (n *node[S]) findSub(sub S) int {
	if n.x != nil && n.x.subIdx != nil {
		if i, ok := n.x.subIdx[sub]; ok {
			return int(i)
		}
		return -1
	}
	for i := range n.subs {
		if n.subs[i].sub == sub {
			return i
		}
	}
	return -1
}

// setSub adds or replaces sub's subscription on n and reports a replacement.
func (n *node[S]) setSub(sub S, o Options) (existed bool) {
	if i := n.findSub(sub); i >= 0 {
		n.subs[i].opts = o
		return true
	}
	n.subs = append(n.subs, entry[S]{sub, o})
	if n.x != nil && n.x.subIdx != nil {
		n.x.subIdx[sub] = int32(len(n.subs) - 1)
	} else if len(n.subs) > subIdxAt {
		idx := make(map[S]int32, 2*len(n.subs))
		for i, e := range n.subs {
			idx[e.sub] = int32(i)
		}
		n.extra().subIdx = idx
	}
	return false
}

// removeSub removes sub's subscription from n and reports whether there was
// one. The order of the remaining subscribers changes.
func (n *node[S]) removeSub(sub S) bool {
	i := n.findSub(sub)
	if i < 0 {
		return false
	}
	last := len(n.subs) - 1
	n.subs[i] = n.subs[last]
	n.subs[last] = entry[S]{}
	n.subs = n.subs[:last]
	if x := n.x; x != nil && x.subIdx != nil {
		delete(x.subIdx, sub)
		if i < last {
			x.subIdx[n.subs[i].sub] = int32(i)
		}
		if len(n.subs) <= subLinAt {
			x.subIdx = nil
			n.tidy()
		}
	}
	if len(n.subs) == 0 {
		n.subs = nil
	} else if cap(n.subs) > 4*len(n.subs) && cap(n.subs) > 8 {
		n.subs = append([]entry[S](nil), n.subs...) // give back memory after a mass unsubscribe
	}
	return true
}

// groupFor returns the shared group name on filter at n, creating it.
func (n *node[S]) groupFor(name, filter string) *group[S] {
	x := n.extra()
	for _, g := range x.groups {
		if g.name == name {
			return g
		}
	}
	// Copy both strings out of the caller's memory.
	g := &group[S]{name: strings.Clone(name), filter: strings.Clone(filter)}
	x.groups = append(x.groups, g)
	return g
}

func (n *node[S]) removeMember(name string, sub S) bool {
	if n.x == nil {
		return false
	}
	for gi, g := range n.x.groups {
		if g.name != name {
			continue
		}
		if !g.remove(sub) {
			return false
		}
		if len(g.members) == 0 {
			gs := n.x.groups
			copy(gs[gi:], gs[gi+1:])
			gs[len(gs)-1] = nil
			n.x.groups = gs[:len(gs)-1]
			if len(n.x.groups) == 0 {
				n.x.groups = nil
			}
			n.tidy()
		}
		return true
	}
	return false
}

func (g *group[S]) set(sub S, o Options) (existed bool) {
	for i := range g.members {
		if g.members[i].Sub == sub {
			g.members[i].Opts = o
			return true
		}
	}
	g.members = append(g.members, Member[S]{sub, o})
	return false
}

// remove removes sub, keeping the other members' order.
func (g *group[S]) remove(sub S) bool {
	for i := range g.members {
		if g.members[i].Sub == sub {
			copy(g.members[i:], g.members[i+1:])
			g.members[len(g.members)-1] = Member[S]{}
			g.members = g.members[:len(g.members)-1]
			return true
		}
	}
	return false
}
