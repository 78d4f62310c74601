package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// RelayGrace is how long a session that moved to another node keeps its
// subscriptions here after its release, relaying what they match to the
// new node. The other nodes learn of the new node's interest, and of this
// one's withdrawal, a link round trip or so after the move; until then they
// may still send this node messages for the session. It is far longer than
// a round trip so that none falls in between; a message that reaches the
// new node both directly and through the relay is delivered twice (QoS 1
// and 2 are at least once across a move).
const RelayGrace = 3 * time.Second

// Relay carries deliveries for a session that moved to another node.
// The cluster layer implements it; it is part of Remote.
type Relay interface {
	// Relay sends ds to node, for its session clientID; it must not block
	// (it queues on the link to node, dropping and counting when full).
	Relay(node, clientID string, ds []Relayed)
}

// Relayed is one delivery relayed to a session's new node: the message and
// what the subscription made of it here.
type Relayed struct {
	Msg    *message.Message
	QoS    byte
	Retain bool     // the RETAIN flag to send
	IDs    []uint32 // subscription identifiers
	Shared string   // "$share/group/filter" for a shared subscription's delivery
}

// movedSessions are the sessions released to another node whose
// subscriptions still catch messages here (the relay stubs).
type movedSessions struct {
	relay Relay        // nil: no cluster; released sessions end at once
	n     atomic.Int32 // len(mu.to), read on the delivery path without the lock
	mu    struct {
		sync.Mutex
		to      map[*session.Session]string // stub -> node it moved to
		arrived map[string]time.Time        // client id -> when its session moved here (kept 2 x RelayGrace)
	}
}

// noteArrival records when a moved session's subscriptions were in place
// here: a message published here since then was delivered to it directly,
// so the old node's relay of it is a duplicate (DeliverRelayed skips it).
func (b *Broker) noteArrival(clientID string) {
	now := b.clock.Now()
	b.moved.mu.Lock()
	if b.moved.mu.arrived == nil {
		b.moved.mu.arrived = map[string]time.Time{}
	}
	b.moved.mu.arrived[clientID] = now
	b.moved.mu.Unlock()
	b.clock.AfterFunc(2*RelayGrace, func() {
		b.moved.mu.Lock()
		if b.moved.mu.arrived[clientID].Equal(now) {
			delete(b.moved.mu.arrived, clientID)
		}
		b.moved.mu.Unlock()
	})
}

// relayedHere reports whether m, relayed for clientID, was published here
// after the session arrived, and so was delivered to it already.
func (b *Broker) relayedHere(clientID string, m *message.Message) bool {
	if b.remote == nil || m.Origin != b.remote.NodeID {
		return false
	}
	b.moved.mu.Lock()
	at, ok := b.moved.mu.arrived[clientID]
	b.moved.mu.Unlock()
	return ok && !m.Created.Before(at)
}

// SetRelay sets only what relays deliveries to a session's new node
// (SetRemote sets it from Remote.Relay): for a broker whose sessions are
// released to other nodes without the rest of the cluster, as in its
// tests. It must be called before the node serves clients.
func (b *Broker) SetRelay(r Relay) { b.moved.relay = r }

// movedTo returns the node s moved to, or "" if it has not.
func (b *Broker) movedTo(s *session.Session) string {
	if b.moved.n.Load() == 0 {
		return ""
	}
	b.moved.mu.Lock()
	defer b.moved.mu.Unlock()
	return b.moved.mu.to[s]
}

// relayIfMoved relays dl for s to the node s moved to, if it did.
func (b *Broker) relayIfMoved(s *session.Session, dl session.Delivery) bool {
	node := b.movedTo(s)
	if node == "" {
		return false
	}
	b.moved.relay.Relay(node, s.ID, []Relayed{relayed(dl)})
	return true
}

func relayed(dl session.Delivery) Relayed {
	return Relayed{Msg: dl.Msg, QoS: dl.QoS, Retain: dl.Retain, IDs: dl.IDs, Shared: dl.Shared}
}

// releaseMoved ends s, whose state st was exported to st.MovedTo and has
// arrived there, without losing what reached s since the export: from now
// on its deliveries are relayed to the new node; what was queued after the
// snapshot is relayed at once; and s's subscriptions stay in the index for
// RelayGrace (s itself has ended: it is no longer registered, stored or in
// the directory), so that messages other nodes still send here follow the
// session too.
func (b *Broker) releaseMoved(s *session.Session, st *SessionState) {
	node := st.MovedTo
	b.moved.mu.Lock()
	if b.moved.mu.to == nil {
		b.moved.mu.to = map[*session.Session]string{}
	}
	b.moved.mu.to[s] = node
	b.moved.n.Store(int32(len(b.moved.mu.to)))
	b.moved.mu.Unlock()
	// Deliveries from here on are relayed (deliver checks movedTo before
	// and after offering to s), so the queue below is final.
	residue := b.residue(s, st)
	subs := s.Subscriptions()
	b.deregister(s)
	b.retire(s)
	if len(residue) > 0 {
		b.moved.relay.Relay(node, s.ID, residue)
	}
	b.clock.AfterFunc(RelayGrace, func() {
		b.unindex(s, subs)
		b.moved.mu.Lock()
		delete(b.moved.mu.to, s)
		b.moved.n.Store(int32(len(b.moved.mu.to)))
		b.moved.mu.Unlock()
	})
}

// residue returns what s holds that the snapshot st did not: messages
// delivered to s after its export. Messages are told apart by identity
// (a delivery shares the routed *message.Message); spilled messages read
// back from the store are new values, so they are relayed again, which
// at worst duplicates them.
func (b *Broker) residue(s *session.Session, st *SessionState) []Relayed {
	now, err := b.exportSession(s)
	if err != nil {
		b.log.Error("relaying a moved session's last messages: reading them failed", "client", s.ID, "err", err)
		return nil
	}
	sent := make(map[*message.Message]bool, len(st.Messages))
	for _, q := range st.Messages {
		sent[q.Msg] = true
	}
	var out []Relayed
	for _, q := range now.Messages {
		if q.Msg == nil || sent[q.Msg] || q.State == store.ReleaseSent {
			continue
		}
		out = append(out, Relayed{Msg: q.Msg, QoS: q.QoS, Retain: q.RetainFlag, IDs: q.SubIDs})
	}
	return out
}

// DeliverRelayed delivers what a session's previous node relayed to it
// here, except messages published here after the session arrived (they
// were delivered to it directly). It reports how many it took; when the
// session is no longer here (it moved on, or ended) they are dropped and
// counted.
func (b *Broker) DeliverRelayed(clientID string, ds []Relayed) int {
	b.mu.Lock()
	s := b.mu.sessions[clientID]
	b.mu.Unlock()
	if s == nil || s.Ended() {
		b.metrics.Drop(metrics.DropMovedAway, len(ds))
		return 0
	}
	var ps session.Persist
	for _, d := range ds {
		if b.relayedHere(clientID, d.Msg) {
			continue
		}
		dl := session.Delivery{Msg: d.Msg, QoS: d.QoS, Retain: d.Retain, IDs: d.IDs, Shared: d.Shared}
		b.deliver(s, dl, &ps)
	}
	b.commitPersist(&ps)
	return len(ds)
}
