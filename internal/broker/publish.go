package broker

import (
	"context"
	"strings"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/session"
)

// Publish implements session.Hub: route m to every matching session. from
// may be nil for messages the broker itself publishes. done (nil for QoS 0)
// receives the acknowledgement's reason code once every write the
// acknowledgement depends on is durable.
func (b *Broker) Publish(from *session.Session, m *message.Message, done session.Acker) {
	ps := session.Persist{From: from}
	needSync := false
	cl := b.cluster
	if cl != nil && isSys(m.Topic) {
		cl = nil // $SYS statistics are this node's own
	}
	if cl != nil {
		m.Origin = cl.NodeID()
		if m.Retain {
			m.Stamp = cl.Stamp()
		}
	}
	if m.Retain {
		b.retain(m, &ps)
		if m.QoS > 0 && b.store != nil && !isSys(m.Topic) {
			needSync = true
		}
	}

	ms := b.matches.Get().(*router.Matches[*session.Session])
	b.subs.RLock()
	b.subs.ix.Match(m.Topic, from, ms)
	b.subs.RUnlock()
	code := packet.Success
	if cl == nil && len(ms.Direct) == 0 && len(ms.Shared) == 0 {
		code = packet.NoMatchingSubscribers
	}
	for i := range ms.Direct {
		d := &ms.Direct[i]
		dl := session.Delivery{Msg: m, QoS: min(m.QoS, d.QoS), Retain: m.Retain && d.RetainAsPublished}
		if len(d.IDs) > 0 {
			dl.IDs = append([]uint32(nil), d.IDs...)
		}
		if b.deliver(d.Sub, dl, &ps) {
			needSync = true
		}
	}
	var served []string
	for i := range ms.Shared {
		g := &ms.Shared[i]
		member := pickMember(g, nil)
		if member == nil {
			continue
		}
		if cl != nil {
			served = append(served, sharedKey(g.Group, g.Filter))
		}
		dl := session.Delivery{Msg: m, QoS: min(m.QoS, member.Opts.QoS), Retain: m.Retain && member.Opts.RetainAsPublished,
			Shared: sharedKey(g.Group, g.Filter)}
		if member.Opts.ID != 0 {
			dl.IDs = []uint32{member.Opts.ID}
		}
		if b.deliver(member.Sub, dl, &ps) {
			needSync = true
		}
	}
	b.matches.Put(ms)
	if cl != nil {
		cl.Forward(m, served)
		if m.Retain {
			cl.Retained(m)
		}
	}

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
		err := b.store.Commit(context.Background(), ps.Batch, cb)
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

func sharedKey(group, filter string) string { return "$share/" + group + "/" + filter }

// redistributeShared hands the messages a departing member of shared groups
// had not acknowledged to other members of the same groups.
func (b *Broker) redistributeShared(s *session.Session) {
	ds := s.TakeShared()
	if len(ds) == 0 {
		return
	}
	var ps session.Persist
	ms := b.matches.Get().(*router.Matches[*session.Session])
	for _, d := range ds {
		b.subs.RLock()
		b.subs.ix.Match(d.Msg.Topic, nil, ms)
		b.subs.RUnlock()
		delivered := false
		for i := range ms.Shared {
			g := &ms.Shared[i]
			if sharedKey(g.Group, g.Filter) != d.Shared {
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
	b.matches.Put(ms)
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
		keep = func(cur *message.Message) bool { return !newer(m, cur) }
	}
	if keep == nil {
		keep = func(*message.Message) bool { return false }
	}
	if !b.retained.SetIf(m, keep) {
		return false
	}
	if b.store != nil && !isSys(m.Topic) {
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

func isSys(t string) bool { return strings.HasPrefix(t, "$SYS/") }
