package broker

import (
	"errors"
	"fmt"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// ErrSessionMoving is returned (wrapped) by Directory.Takeover when the
// client's session is on another node that exported it but whose answer
// did not arrive in time. The holder keeps the session until the move
// completes or is abandoned, so the CONNECT is refused with Server
// Unavailable rather than answered with a fresh session: the client's
// retry gets its session.
var ErrSessionMoving = errors.New("broker: session is moving from another node")

// SessionState is a session moving between nodes.
type SessionState struct {
	Record   *store.SessionRecord
	Messages []*store.QueuedMessage // in sequence order
	Inbound  []uint16

	// MovedTo is the node an exported session went to, set by the cluster
	// layer: once released, what still reaches the old copy is relayed
	// there (relay.go).
	MovedTo string
	// Release, set by the cluster layer on the node that took the session
	// over, tells the old node to end its copy; the broker calls it once
	// the session and its subscriptions are in place here.
	Release func()

	from *session.Session // the exported session, on the node that exported it
}

// HandOver moves a local session out to another node: the client's
// connection here (if any) is closed with Session Taken Over, and unless
// cleanStart discards it, the session's state is returned for the new node
// to import. The session is then removed here. A will still pending is
// published when the session is discarded; a moved session's will is
// dropped, as the client has reconnected.
func (b *Broker) HandOver(clientID string, cleanStart bool) (*SessionState, error) {
	s := b.takeOffline(clientID)
	if s == nil {
		return nil, nil
	}
	will, _ := s.TakeWill()
	var st *SessionState
	if cleanStart {
		if will != nil {
			b.publishWill(s, will)
		}
	} else {
		var err error
		if st, err = b.exportSession(s); err != nil {
			return nil, err
		}
	}
	b.endSession(s)
	b.updateSessionGauges()
	return st, nil
}

// ExportSession is the first half of a two-phase hand-over: the client's
// connection here (if any) is closed with Session Taken Over, its pending
// will is dropped (the client has reconnected elsewhere), and a snapshot of
// the session is returned. The session stays here, offline, so that the
// new node can ask again if the answer is lost; ReleaseSession ends it once
// the new node has it.
func (b *Broker) ExportSession(clientID string) (*SessionState, error) {
	s := b.takeOffline(clientID)
	if s == nil {
		return nil, nil
	}
	if w, _ := s.TakeWill(); w != nil && s.Expiry() > 0 {
		b.persistSession(s, b.clock.Now(), nil)
	}
	st, err := b.exportSession(s)
	if err != nil {
		return nil, err
	}
	st.from = s
	return st, nil
}

// takeOffline closes the connection bound to clientID's session, if any,
// with Session Taken Over, and returns the session, or nil if there is none
// (or it ended with its connection, having no expiry).
func (b *Broker) takeOffline(clientID string) *session.Session {
	b.mu.Lock()
	s := b.mu.sessions[clientID]
	b.mu.Unlock()
	if s == nil {
		return nil
	}
	if c := s.Conn(); c != nil {
		c.Disconnect(packet.SessionTakenOver, "the client connected to another node")
		<-c.Done()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.sessions[clientID]
}

// ReleaseSession is the second half of a hand-over: it ends the session st
// was exported from, unless a client has connected to it here since. With
// st.MovedTo set (and a Relay), what reached the session since its export,
// and what reaches its subscriptions for RelayGrace more, is relayed to the
// new node (relay.go).
func (b *Broker) ReleaseSession(st *SessionState) {
	s := st.from
	if s == nil || !b.offlineAndCurrent(s) {
		return
	}
	if st.MovedTo != "" && b.moved.relay != nil {
		b.releaseMoved(s, st)
	} else {
		b.endSession(s)
	}
	b.updateSessionGauges()
}

func (b *Broker) exportSession(s *session.Session) (*SessionState, error) {
	msgs, inbound, spillFrom, spilled := s.Export()
	if spilled > 0 && b.store != nil {
		err := b.store.LoadMessagesFrom(s.ID, spillFrom, spilled, func(q *store.QueuedMessage) error {
			q.Seq = uint64(len(msgs) + 1)
			msgs = append(msgs, q)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("broker: exporting session %q: %w", s.ID, err)
		}
	}
	rec := s.Record(b.clock.Now())
	rec.Will, rec.WillDelay = nil, 0
	return &SessionState{Record: rec, Messages: msgs, Inbound: inbound}, nil
}

// importSession builds a session moved here from another node and persists
// it if it outlives its connection.
func (b *Broker) importSession(id string, v packet.Version, expiry uint32, st *SessionState) *session.Session {
	s := session.New(id, b.env, v, expiry)
	s.RestoreSubscribedAt(st.Record.SubscribedAt)
	b.restoreSubscriptions(s, st.Record.Subscriptions)
	b.noteArrival(id)
	s.RestoreInbound(st.Inbound)
	s.RestoreCursors(st.Record.Cursors)
	persist := expiry > 0 && b.store != nil
	var bt store.Batch
	for i, q := range st.Messages {
		q.Seq = uint64(i + 1)
		s.Restore(q)
		if persist {
			bt.PutMessage(id, q)
		}
	}
	if persist {
		for _, in := range st.Inbound {
			bt.PutInbound(id, in)
		}
		if bt.Len() > 0 {
			b.commitBehind(&bt)
		}
	}
	b.mu.Lock()
	b.mu.sessions[id] = s
	b.mu.Unlock()
	return s
}

// HoldsSession reports whether a session for clientID lives here
// (connected or not).
func (b *Broker) HoldsSession(clientID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.sessions[clientID] != nil
}

// SessionIDs returns the client ids of the sessions held here (connected
// or not), for the cluster's session directory to register them again
// after a restart or a membership change.
func (b *Broker) SessionIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.mu.sessions))
	for id := range b.mu.sessions {
		out = append(out, id)
	}
	return out
}
