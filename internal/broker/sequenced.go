package broker

import (
	"context"
	"slices"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/topic"
)

// Sequencer takes the publishes of sequenced topics: the access node's side
// of the sequenced publish path (package cluster/sequenced), which sends
// them to their placement group's home and acknowledges them once
// committed. Local subscribers get them, like every other node's, from the
// group's feed (package delivery), in the group's order: a sequenced
// publish is neither delivered nor forwarded here.
type Sequencer interface {
	// Publish takes m if its topic is sequenced and reports whether it
	// did; ack (nil for QoS 0) then receives the acknowledgement's reason
	// code. clientID and packetID (0: none) identify the publish so that
	// its retries are recognised.
	Publish(clientID string, packetID uint16, m *message.Message, ack session.Acker) bool
}

// SetSequencer connects the sequenced publish path. It must be called
// before the node serves clients.
func (b *Broker) SetSequencer(s Sequencer) { b.sequencer.Store(&s) }

// packetIDer is what an acknowledgement slot knows of its publish.
type packetIDer interface{ PacketID() uint16 }

// publishSequenced hands m to the sequencer if its topic is sequenced.
func (b *Broker) publishSequenced(from *session.Session, m *message.Message, done session.Acker) bool {
	if topic.IsSys(m.Topic) {
		return false
	}
	sp := b.sequencer.Load()
	if sp == nil {
		return false
	}
	sq := *sp
	var client string
	if from != nil {
		client = from.ID
	}
	var pid uint16
	if p, ok := done.(packetIDer); ok {
		pid = p.PacketID()
	}
	if r := b.remote; r != nil {
		m.Origin = r.NodeID
	}
	if !sq.Publish(client, pid, m, done) {
		return false
	}
	if o := b.observer; o != nil && from != nil {
		o.Published(accessClient{from}, m.Topic)
	}
	return true
}

// DeliverSequenced delivers records of group's log, in the group's order
// (ms[i] is the record at position seqs[i]), to the local subscribers
// matching their topics (the delivery layer calls it for the records its
// feeds bring, on every node with interest). Each session takes each
// record through its cursor on the group (session/cursor.go): at most
// once, in order, and not while a replay of the group for that session
// catches up. It never forwards: every node receives the group's records
// from its own feed.
//
// A run of records with the same topic and publisher shares one walk of
// the subscription index, unless a shared group matched (its round robin
// moves with every record).
func (b *Broker) DeliverSequenced(group string, ms []*message.Message, seqs []uint64) {
	f := b.fanouts.Get().(*fanout)
	defer b.putFanout(f)
	var from *session.Session
	for i, m := range ms {
		if o := b.observer; o != nil {
			o.Delivered(m.Topic)
		}
		samePublisher := i > 0 && m.Publisher == ms[i-1].Publisher
		if !samePublisher {
			from = b.session(m.Publisher)
		}
		if !samePublisher || m.Topic != ms[i-1].Topic || len(f.ms.Shared) > 0 {
			b.match(m.Topic, from, f)
		}
		b.recipients(m, everyGroup, f)
		for r := range f.rs {
			f.rs[r].dl.Group, f.rs[r].dl.Seq = group, seqs[i]
		}
		var ps session.Persist
		b.fanOut(f.rs, &ps)
		b.commitPersist(&ps)
		clear(f.rs)
		f.rs = f.rs[:0]
	}
}

// session returns the local session of client id, if any (nil for "").
func (b *Broker) session(id string) *session.Session {
	if id == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.sessions[id]
}

// ReplayTo offers s the record at position seq of group's log, replayed
// (history asked for with sx-from, or a persistent session's backlog):
// pick chooses, from the session's subscriptions matching the topic (as
// subscribed), those it is delivered through (none: not delivered); their
// options fold as for a live delivery. It waits while the session's queue
// is full, until ctx ends. It reports false once the session is gone (or
// ctx ended): the replay stops.
func (b *Broker) ReplayTo(ctx context.Context, s *session.Session, m *message.Message, group string, seq uint64, pick func(matching []string) []string) bool {
	var matching []string
	subs := s.Subscriptions()
	for f := range subs {
		inner := f
		if _, in, shared, _ := topic.ParseShared(f); shared {
			continue // replays are for a session, not a shared group
		} else if in != "" {
			inner = in
		}
		if topic.Match(inner, m.Topic) {
			matching = append(matching, f)
		}
	}
	slices.Sort(matching)
	through := pick(matching)
	dl := session.Delivery{Msg: m, Group: group, Seq: seq, Replay: true}
	if len(through) == 0 {
		return !s.Ended()
	}
	for _, f := range through {
		o := subs[f]
		if o.NoLocal && m.Publisher == s.ID {
			continue
		}
		dl.QoS = max(dl.QoS, min(m.QoS, o.QoS))
		dl.Retain = dl.Retain || (m.Retain && o.RetainAsPublished)
		if o.ID != 0 {
			dl.IDs = append(dl.IDs, o.ID)
		}
	}
	var ps session.Persist
	defer b.commitPersist(&ps)
	for {
		out, wait := s.Deliver(dl, &ps)
		switch out {
		case session.Gone:
			return false
		case session.Full:
			b.commitPersist(&ps)
			ps = session.Persist{}
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
}

// Replays is the delivery layer as the broker tells it of sessions: it
// replays sequenced topics' history (sx-from) and persistent sessions'
// backlogs, and serves the retained messages of sequenced topics.
type Replays interface {
	// Subscribing is told of a SUBSCRIBE's requests before they take
	// effect, so that replays are in place before live messages flow.
	Subscribing(s *session.Session, reqs []session.SubRequest)
	// Subscribed is told once they took effect (codes: granted or not;
	// existed: the subscription existed before), after SUBACK is queued.
	Subscribed(s *session.Session, reqs []session.SubRequest, codes []packet.ReasonCode, existed []bool)
	// Attached is told when a connection bound s: a persistent session's
	// backlog is replayed from its cursors.
	Attached(s *session.Session)
}

// SetReplays connects the delivery layer; call it before serving clients.
func (b *Broker) SetReplays(r Replays) { b.replays = r }

// DeliverRetainedTo sends s the retained message m of a sequenced topic
// (the latest retained record of its log) for its subscription filter, as
// sendRetained does for direct topics. It waits while the session's queue
// is full, until ctx ends.
func (b *Broker) DeliverRetainedTo(ctx context.Context, s *session.Session, filter string, m *message.Message) {
	o, ok := s.Subscriptions()[filter]
	if !ok || m.Expired(b.clock.Now()) {
		return
	}
	dl := session.Delivery{Msg: m, QoS: min(m.QoS, o.QoS), Retain: true}
	if o.ID != 0 {
		dl.IDs = []uint32{o.ID}
	}
	var ps session.Persist
	defer b.commitPersist(&ps)
	for {
		out, wait := s.Deliver(dl, &ps)
		if out != session.Full {
			return
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return
		}
	}
}
