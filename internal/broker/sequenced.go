package broker

import (
	"github.com/sextantmq/sextant/internal/message"
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
	return sq.Publish(client, pid, m, done)
}

// DeliverSequenced delivers a record of a placement group's log, in the
// group's order, to the local subscribers matching its topic (the
// delivery layer calls it for every record its feeds bring, on every node
// with interest). skip (may be nil) excludes sessions that get the group's
// records another way for now (a replay catching up). It never forwards:
// every node receives the group's records from its own feed.
func (b *Broker) DeliverSequenced(m *message.Message, skip func(*session.Session) bool) {
	var ps session.Persist
	f := b.fanouts.Get().(*fanout)
	b.route(m, nil, everyGroup, f)
	if skip != nil {
		rs := f.rs[:0]
		for _, r := range f.rs {
			if !skip(r.to) {
				rs = append(rs, r)
			}
		}
		clear(f.rs[len(rs):])
		f.rs = rs
	}
	b.fanOut(f.rs, &ps)
	b.putFanout(f)
	b.commitPersist(&ps)
}
