package cluster

import (
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/retained"
	"github.com/sextantmq/sextant/internal/topic"
)

// tombstone remembers a retained deletion.
type tombstone struct {
	stamp   uint64
	origin  string
	expires time.Time
}

// Retained implements broker.Cluster: a retained update published here
// (already applied locally, stamped) goes to every connected peer; a peer
// whose link is down gets a full sync when it reconnects.
func (c *Cluster) Retained(m *message.Message) {
	if c.group.Stopped() {
		return
	}
	c.retained.Lock()
	if len(m.Payload) == 0 {
		c.retained.tombs[m.Topic] = tombstone{stamp: m.Stamp, origin: m.Origin, expires: c.clock.Now().Add(c.cfg.TombstoneTTL)}
	} else {
		delete(c.retained.tombs, m.Topic)
	}
	c.retained.Unlock()
	enc := message.Append(make([]byte, 0, m.Size()), m)
	for _, l := range c.peers.Links() {
		l.SendRetained(enc)
	}
}

// applyRetained applies a retained update from a peer: last writer wins by
// (Stamp, Origin), and a deletion newer than the update (a tombstone) wins
// over it even when the message is no longer held.
func (c *Cluster) applyRetained(m *message.Message) {
	c.hlc.observe(m.Stamp)
	c.retained.Lock()
	defer c.retained.Unlock()
	if t, ok := c.retained.tombs[m.Topic]; ok && !retained.Newer(m, t.stamp, t.origin) {
		c.metrics.retainedStale.Inc()
		return
	}
	applied := c.b.ApplyRetained(m)
	switch {
	case !applied:
		c.metrics.retainedStale.Inc()
	case len(m.Payload) == 0:
		c.retained.tombs[m.Topic] = tombstone{stamp: m.Stamp, origin: m.Origin, expires: c.clock.Now().Add(c.cfg.TombstoneTTL)}
		c.metrics.retainedApplied.Inc()
	default:
		delete(c.retained.tombs, m.Topic)
		c.metrics.retainedApplied.Inc()
	}
}

// retainedSnapshot encodes every retained message and tombstone, for a
// full sync on a new link.
func (c *Cluster) retainedSnapshot() [][]byte {
	var out [][]byte
	c.b.RetainedMessages(func(m *message.Message) bool {
		if m.Stamp == 0 && m.Origin == "" && topic.IsSys(m.Topic) {
			return true // this node's own statistics
		}
		out = append(out, message.Append(nil, m))
		return true
	})
	now := c.clock.Now()
	c.retained.Lock()
	for t, ts := range c.retained.tombs {
		if now.After(ts.expires) {
			continue
		}
		out = append(out, message.Append(nil, &message.Message{Topic: t, Retain: true, Stamp: ts.stamp, Origin: ts.origin}))
	}
	c.retained.Unlock()
	return out
}

// sweepTombstones forgets deletions older than TombstoneTTL, here and in
// the store.
func (c *Cluster) sweepTombstones() {
	now := c.clock.Now()
	var gone []message.Message
	c.retained.Lock()
	for t, ts := range c.retained.tombs {
		if now.After(ts.expires) {
			delete(c.retained.tombs, t)
			gone = append(gone, message.Message{Topic: t, Stamp: ts.stamp})
		}
	}
	c.retained.Unlock()
	for _, m := range gone {
		c.b.ForgetTombstone(m.Topic, m.Stamp)
	}
}

// loadTombstones takes the deletions the broker kept in its store: each
// lasts TombstoneTTL from the time in its stamp (expired ones go at the next
// sweep, which also removes them from the store).
func (c *Cluster) loadTombstones(ms []*message.Message) {
	c.retained.Lock()
	defer c.retained.Unlock()
	for _, m := range ms {
		c.hlc.observe(m.Stamp)
		expires := time.UnixMilli(int64(m.Stamp >> logicalBits)).Add(c.cfg.TombstoneTTL)
		if cur, ok := c.retained.tombs[m.Topic]; ok && !retained.Newer(m, cur.stamp, cur.origin) {
			continue
		}
		c.retained.tombs[m.Topic] = tombstone{stamp: m.Stamp, origin: m.Origin, expires: expires}
	}
}
