package cluster

import (
	"slices"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/topic"
)

// remoteOptions are the options a peer's interest is indexed with: the
// broker on the receiving node applies its own subscribers' options.
var remoteOptions = router.Options{QoS: 2}

// target is one node a forwarded message goes to.
type target struct {
	node   string
	direct bool
	groups []string
}

// Forward implements broker.Cluster: the message goes once to every node
// with matching non-shared interest, and each matching shared group that
// was not served here goes to exactly one node with members (round robin
// over the group's nodes, preferring connected links). Each node gets one
// item saying what to deliver it to, on its link's FIFO queue, so messages
// from one publisher reach every node in the order they were published.
func (c *Cluster) Forward(m *message.Message, served []string) {
	if c.group.Stopped() {
		return
	}
	ms := c.matches.Get().(*router.Matches[string])
	defer c.matches.Put(ms)
	c.remote.RLock()
	c.remote.ix.Match(m.Topic, "", ms)
	c.remote.RUnlock()
	if len(ms.Direct) == 0 && len(ms.Shared) == 0 {
		return
	}
	var buf [8]target
	ts := buf[:0]
	at := func(node string) *target {
		for i := range ts {
			if ts[i].node == node {
				return &ts[i]
			}
		}
		ts = append(ts, target{node: node})
		return &ts[len(ts)-1]
	}
	for i := range ms.Direct {
		at(ms.Direct[i].Sub).direct = true
	}
	for i := range ms.Shared {
		g := &ms.Shared[i]
		key := topic.JoinShared(g.Group, g.Filter)
		if slices.Contains(served, key) {
			continue
		}
		if node := c.pickNode(g); node != "" {
			t := at(node)
			t.groups = append(t.groups, key)
		}
	}
	enc := message.Append(make([]byte, 0, m.Size()), m)
	for i := range ts {
		c.peers.Publish(ts[i].node, &peer.Publish{Msg: enc, QoS: m.QoS, Direct: ts[i].direct, Groups: ts[i].groups})
	}
	c.metrics.forwarded.Add(float64(len(ts)))
}

// pickNode chooses the node that serves a shared group for one message:
// from the group's round-robin cursor, the first node whose link is up, or
// the cursor's node if none is.
func (c *Cluster) pickNode(g *router.SharedMatch[string]) string {
	n := len(g.Members)
	if n == 0 {
		return ""
	}
	start := int(g.Start % uint64(n))
	for i := 0; i < n; i++ {
		node := g.Members[(start+i)%n].Sub
		if l := c.peers.Link(node); l != nil && l.Up() {
			return node
		}
	}
	return g.Members[start].Sub
}

// deliver hands a message forwarded here to local subscribers only.
func (c *Cluster) deliver(node string, msg []byte, direct bool, groups []string) {
	m, err := message.Decode(msg)
	if err != nil {
		c.metrics.corrupt.Inc()
		c.log.Warn("cluster: undecodable forwarded message", "from", node, "err", err)
		return
	}
	c.b.DeliverForwarded(m, direct, groups)
}

// remoteInterest applies a peer's announcements to the remote interest
// index.
func (c *Cluster) remoteInterest(node string, full bool, add, remove []string) {
	if node == c.id {
		return
	}
	c.remote.Lock()
	defer c.remote.Unlock()
	set := c.remote.filters[node]
	if set == nil {
		set = map[string]struct{}{}
		c.remote.filters[node] = set
	}
	if full {
		keep := make(map[string]struct{}, len(add))
		for _, f := range add {
			keep[f] = struct{}{}
		}
		for f := range set {
			if _, ok := keep[f]; !ok {
				c.remote.ix.Unsubscribe(node, f)
				delete(set, f)
			}
		}
	}
	for _, f := range remove {
		if _, ok := set[f]; ok {
			c.remote.ix.Unsubscribe(node, f)
			delete(set, f)
		}
	}
	for _, f := range add {
		if _, ok := set[f]; ok {
			continue
		}
		if _, err := c.remote.ix.Subscribe(node, f, remoteOptions); err != nil {
			c.log.Warn("cluster: peer announced an invalid filter", "from", node, "filter", f, "err", err)
			continue
		}
		set[f] = struct{}{}
	}
	c.metrics.remoteFilters.Set(float64(c.remote.ix.Len()))
}

// dropInterest forgets everything node announced, so nothing more is
// forwarded to it.
func (c *Cluster) dropInterest(node string) {
	c.remote.Lock()
	defer c.remote.Unlock()
	for f := range c.remote.filters[node] {
		c.remote.ix.Unsubscribe(node, f)
	}
	delete(c.remote.filters, node)
	c.metrics.remoteFilters.Set(float64(c.remote.ix.Len()))
}

// RemoteInterest returns the filters each peer has announced (for the
// admin API and tests).
func (c *Cluster) RemoteInterest() map[string][]string {
	c.remote.RLock()
	defer c.remote.RUnlock()
	out := make(map[string][]string, len(c.remote.filters))
	for node, set := range c.remote.filters {
		fs := make([]string, 0, len(set))
		for f := range set {
			fs = append(fs, f)
		}
		slices.Sort(fs)
		out[node] = fs
	}
	return out
}
