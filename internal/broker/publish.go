package broker

import (
	"slices"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/retained"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/topic"
)

// Publish implements session.Hub: route m to every matching session. from
// may be nil for messages the broker itself publishes. done (nil for QoS 0)
// receives the acknowledgement's reason code once every write the
// acknowledgement depends on is durable.
//
// The path: stamp the message for the cluster, update the retained index,
// find the local recipients (route), deliver to them (fanOut), hand the
// message to the other nodes with matching interest (Forward, once per
// publish), then commit the durable writes and acknowledge. A message
// another node forwarded here takes the same route and fanOut in
// DeliverForwarded.
func (b *Broker) Publish(from *session.Session, m *message.Message, done session.Acker) {
	if b.publishSequenced(from, m, done) {
		return
	}
	ps := session.Persist{From: from}
	needSync := false
	r := b.remote
	if r != nil && topic.IsSys(m.Topic) {
		r = nil // $SYS statistics are this node's own
	}
	if r != nil {
		m.Origin = r.NodeID
		if m.Retain {
			m.Stamp = r.Retained.Stamp()
		}
	}
	if m.Retain {
		b.retain(m, &ps)
		if m.QoS > 0 && b.store != nil && !topic.IsSys(m.Topic) {
			needSync = true
		}
	}

	f := b.fanouts.Get().(*fanout)
	b.route(m, from, everyGroup, f)
	code := packet.Success
	if r == nil && len(f.ms.Direct) == 0 && len(f.ms.Shared) == 0 {
		code = packet.NoMatchingSubscribers
	}
	if b.fanOut(f.rs, &ps) {
		needSync = true
	}
	if r != nil {
		r.Forwarder.Forward(m, f.served())
		if m.Retain {
			r.Retained.Replicate(m)
		}
	}
	b.putFanout(f)

	if ps.Len() > 0 && b.store != nil {
		var cb func(error)
		if needSync && done != nil {
			cb = func(err error) {
				if err != nil {
					b.log.Error("store write failed; publish not acknowledged as durable", "err", err)
					done.Ack(packet.ImplementationSpecificError)
					return
				}
				done.Ack(code)
			}
		} else {
			cb = b.logStoreError
		}
		err := b.commit(ps.Batch, cb)
		if deferred := ps.Ticket.Committed(); deferred != nil {
			b.commitBehind(deferred)
		}
		if err != nil {
			b.log.Error("store write failed", "err", err)
			if needSync && done != nil {
				done.Ack(packet.ImplementationSpecificError)
			}
			return
		}
		if needSync && done != nil {
			return
		}
	} else if ps.Ticket != nil {
		ps.Ticket.Committed()
	}
	if done != nil {
		done.Ack(code)
	}
}

// recipient is one local delivery of a message: a session and what it gets.
type recipient struct {
	to *session.Session
	dl session.Delivery
}

// fanout is one message's local delivery in the making: the index's
// matches, the recipients chosen from them and the shared groups served
// here. Pooled: a publish allocates nothing for it once the buffers have
// grown.
type fanout struct {
	ms   router.Matches[*session.Session]
	rs   []recipient
	keys []string
}

func (b *Broker) putFanout(f *fanout) {
	clear(f.rs)
	f.rs = f.rs[:0]
	clear(f.keys)
	f.keys = f.keys[:0]
	b.fanouts.Put(f)
}

// served returns the shared groups ("$share/group/filter") that got a
// recipient here, which the cluster must not serve again elsewhere. It is
// valid until the fanout goes back to the pool.
func (f *fanout) served() []string {
	for i := range f.rs {
		if k := f.rs[i].dl.Shared; k != "" {
			f.keys = append(f.keys, k)
		}
	}
	return f.keys
}

// scope says which local subscribers a message goes to: for a local
// publish, every matching one; for a message forwarded from another node,
// the direct subscribers if the sender said so and only the shared groups
// it named (it chose this node to serve them).
type scope struct {
	direct    bool
	allGroups bool
	groups    []string
}

// everyGroup is a local publish's scope.
var everyGroup = scope{direct: true, allGroups: true}

// route matches m against the local subscriptions and lists its recipients
// in f.rs: one delivery per matching direct subscriber (its subscriptions
// folded, MQTT 5 3.3.4) and one member of each matching shared group, as
// sc allows. from's own No Local subscriptions do not match.
func (b *Broker) route(m *message.Message, from *session.Session, sc scope, f *fanout) {
	b.match(m.Topic, from, f)
	b.recipients(m, sc, f)
}

// match finds the local subscriptions matching name into f.ms (from's own
// No Local subscriptions excepted). Each call advances the round-robin
// cursor of every matching shared group.
func (b *Broker) match(name string, from *session.Session, f *fanout) {
	b.subs.RLock()
	b.subs.ix.Match(name, from, &f.ms)
	b.subs.RUnlock()
}

// recipients appends to f.rs the deliveries of m that f.ms, m's match,
// calls for, as sc allows.
func (b *Broker) recipients(m *message.Message, sc scope, f *fanout) {
	if sc.direct {
		for i := range f.ms.Direct {
			d := &f.ms.Direct[i]
			dl := session.Delivery{Msg: m, QoS: min(m.QoS, d.QoS), Retain: m.Retain && d.RetainAsPublished}
			if len(d.IDs) > 0 {
				dl.IDs = append([]uint32(nil), d.IDs...)
			}
			f.rs = append(f.rs, recipient{d.Sub, dl})
		}
	}
	for i := range f.ms.Shared {
		g := &f.ms.Shared[i]
		key := topic.JoinShared(g.Group, g.Filter)
		if !sc.allGroups && !slices.Contains(sc.groups, key) {
			continue
		}
		member := pickMember(g, nil)
		if member == nil {
			continue
		}
		dl := session.Delivery{Msg: m, QoS: min(m.QoS, member.Opts.QoS), Retain: m.Retain && member.Opts.RetainAsPublished, Shared: key}
		if member.Opts.ID != 0 {
			dl.IDs = []uint32{member.Opts.ID}
		}
		f.rs = append(f.rs, recipient{member.Sub, dl})
	}
}

// fanOut offers each delivery to its session, in order, adding the durable
// writes they need to ps; it reports whether any was added (a QoS 1/2
// publisher's acknowledgement then waits for them). This is the one loop
// that delivers a message to local sessions, for local publishes and
// forwarded messages alike.
func (b *Broker) fanOut(rs []recipient, ps *session.Persist) (wrote bool) {
	for i := range rs {
		if b.deliver(rs[i].to, rs[i].dl, ps) {
			wrote = true
		}
	}
	return wrote
}

func (b *Broker) logStoreError(err error) {
	if err != nil {
		b.log.Error("store write failed", "err", err)
	}
}

// commitPersist commits what p collected, write-behind, then releases the
// deletions that waited for it.
func (b *Broker) commitPersist(p *session.Persist) {
	if p.Len() > 0 && b.store != nil {
		b.commitBehind(p.Batch)
	}
	if p.Ticket != nil {
		if deferred := p.Ticket.Committed(); deferred != nil && b.store != nil {
			b.commitBehind(deferred)
		}
	}
}

// deliver offers dl to s, applying back-pressure when a non-persistent
// session's queue is full; it reports whether a store write was added.
func (b *Broker) deliver(s *session.Session, dl session.Delivery, ps *session.Persist) bool {
	if b.relayIfMoved(s, dl) {
		return false
	}
	// A release that began while this delivery was being offered has
	// taken its final snapshot already: relay the delivery as well.
	defer b.relayIfMoved(s, dl)
	before := ps.Len()
	out, wait := s.Deliver(dl, ps)
	if out == session.Full {
		timer := b.clock.NewTimer(b.cfg.Limits.SlowConsumer)
		defer timer.Stop()
		for out == session.Full {
			select {
			case <-wait:
			case <-timer.C():
				b.slowConsumer(s)
				return ps.Len() > before
			}
			out, wait = s.Deliver(dl, ps)
		}
	}
	return ps.Len() > before
}

// slowConsumer disconnects a non-persistent session that could not keep up;
// the message that found its queue full is lost with the session and counted.
func (b *Broker) slowConsumer(s *session.Session) {
	b.metrics.SlowConsumers.Inc()
	b.metrics.Drop(metrics.DropSlowConsumer, 1)
	b.log.Warn("disconnecting slow consumer", "client", s.ID)
	if c := s.Conn(); c != nil {
		c.Disconnect(packet.QuotaExceeded, "slow consumer: queue full")
	}
}

// pickMember chooses the member of a shared group to deliver to: round robin
// from the group's cursor, preferring connected members, never skip.
func pickMember(g *router.SharedMatch[*session.Session], skip *session.Session) *router.Member[*session.Session] {
	n := len(g.Members)
	if n == 0 {
		return nil
	}
	start := int(g.Start % uint64(n))
	var fallback *router.Member[*session.Session]
	for i := 0; i < n; i++ {
		m := &g.Members[(start+i)%n]
		if m.Sub == skip {
			continue
		}
		if m.Sub.Online() {
			return m
		}
		if fallback == nil && m.Sub.Persistent() {
			fallback = m
		}
	}
	return fallback
}

// redistributeShared hands the messages a departing member of shared groups
// had not acknowledged to other members of the same groups.
func (b *Broker) redistributeShared(s *session.Session) {
	ds := s.TakeShared()
	if len(ds) == 0 {
		return
	}
	var ps session.Persist
	f := b.fanouts.Get().(*fanout)
	ms := &f.ms
	for _, d := range ds {
		b.subs.RLock()
		b.subs.ix.Match(d.Msg.Topic, nil, ms)
		b.subs.RUnlock()
		delivered := false
		for i := range ms.Shared {
			g := &ms.Shared[i]
			if topic.JoinShared(g.Group, g.Filter) != d.Shared {
				continue
			}
			if member := pickMember(g, s); member != nil {
				d.QoS = min(d.Msg.QoS, member.Opts.QoS)
				d.IDs = nil
				if member.Opts.ID != 0 {
					d.IDs = []uint32{member.Opts.ID}
				}
				b.deliver(member.Sub, d, &ps)
				delivered = true
			}
			break
		}
		if !delivered && d.QoS > 0 {
			b.metrics.Drop(metrics.DropQueueFull, 1)
		}
	}
	b.putFanout(f)
	b.commitPersist(&ps)
}

// retain updates the retained message of m's topic (an empty payload
// deletes it) and adds the durable write to bt. $SYS topics are rebuilt at
// start-up and are not persisted.
func (b *Broker) retain(m *message.Message, ps *session.Persist) {
	b.retainIf(m, ps, nil)
}

// retainIf applies a retained update unless keep says the message held now
// wins (nil: always apply), and adds the durable write to ps. It reports
// whether the update was applied. Updates stamped by the cluster are always
// ordered by their stamps, so a local update cannot overwrite a newer one
// another node made a moment earlier.
func (b *Broker) retainIf(m *message.Message, ps *session.Persist, keep func(cur *message.Message) bool) bool {
	if keep == nil && m.Stamp != 0 {
		keep = func(cur *message.Message) bool { return !retained.Newer(m, cur.Stamp, cur.Origin) }
	}
	if keep == nil {
		keep = func(*message.Message) bool { return false }
	}
	if !b.retained.SetIf(m, keep) {
		return false
	}
	if b.store != nil && !topic.IsSys(m.Topic) {
		if len(m.Payload) == 0 && m.Stamp == 0 {
			ps.Add().DeleteRetained(m.Topic)
		} else {
			// A cluster's (stamped) deletion is kept as a tombstone, so that
			// after a restart an older copy from another node cannot come
			// back; the cluster removes it after its TTL (ForgetTombstone).
			ps.Add().PutRetained(m)
		}
	}
	b.metrics.RetainedMessages.Set(float64(b.retained.Len()))
	return true
}
