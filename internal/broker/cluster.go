package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// Cluster is the rest of the cluster as the broker sees it. A node running
// alone has none. The broker calls it without holding its own locks; its
// methods must not block for long (they queue work for the cluster layer's
// own goroutines), except Takeover, which runs before CONNACK.
type Cluster interface {
	// NodeID is this node's id, recorded as the Origin of local messages.
	NodeID() string
	// Stamp returns a hybrid logical clock time for a retained update.
	Stamp() uint64
	// Forward sends a message published on this node to the other nodes
	// with matching interest. served lists the shared groups
	// ("$share/group/filter") that already had a member here, which the
	// cluster must not serve again elsewhere.
	Forward(m *message.Message, served []string)
	// Interest reports that a filter (as subscribed, "$share/group/filter"
	// for shared ones) gained its first, or lost its last, subscriber here.
	Interest(filter string, present bool)
	// Retained replicates a retained update (empty payload: deletion).
	Retained(m *message.Message)
	// Takeover is called when a client connects here: if its session lives
	// on another node, that node closes the client's connection there and
	// the session's state moves here (nil when there is none to move, or
	// cleanStart discards it). It also records this node as the session's
	// home in the cluster's client directory.
	Takeover(ctx context.Context, clientID string, cleanStart bool) (*SessionState, error)
	// SessionEnded tells the directory a session no longer lives here.
	SessionEnded(clientID string)
}

// ErrSessionMoving is returned (wrapped) by Cluster.Takeover when the
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

// SetCluster connects the broker to its cluster layer. It must be called
// before the node serves clients; the broker then announces its current
// interest through c.
func (b *Broker) SetCluster(c Cluster) {
	b.cluster = c
	for _, f := range b.LocalFilters() {
		c.Interest(f, true)
	}
}

// LocalFilters returns every filter with at least one local subscriber, for
// a full interest announcement after a peer link (re)connects.
func (b *Broker) LocalFilters() []string {
	b.subs.RLock()
	out := make([]string, 0, len(b.subs.counts))
	for f := range b.subs.counts {
		out = append(out, f)
	}
	b.subs.RUnlock()
	return out
}

// interestDelta reports filters whose local subscriber count went from zero
// to one or from one to zero; called with b.subs held (write), it collects
// the changes for announceInterest, which runs after the lock is released.
func (b *Broker) interestDelta(filter string, before, after int, out *[]interestChange) {
	if b.cluster == nil {
		return
	}
	if (before == 0) != (after == 0) {
		*out = append(*out, interestChange{filter, after > 0})
	}
}

type interestChange struct {
	filter  string
	present bool
}

func (b *Broker) announceInterest(ch []interestChange) {
	for _, c := range ch {
		b.cluster.Interest(c.filter, c.present)
	}
}

// DeliverForwarded delivers a message another node forwarded here to local
// subscribers only: to direct subscribers when direct is set, and to one
// member of each shared group listed in groups. It is never forwarded again.
func (b *Broker) DeliverForwarded(m *message.Message, direct bool, groups []string) {
	var ps session.Persist
	ms := b.matches.Get().(*router.Matches[*session.Session])
	b.subs.RLock()
	b.subs.ix.Match(m.Topic, nil, ms)
	b.subs.RUnlock()
	if direct {
		for i := range ms.Direct {
			d := &ms.Direct[i]
			dl := session.Delivery{Msg: m, QoS: min(m.QoS, d.QoS), Retain: m.Retain && d.RetainAsPublished}
			if len(d.IDs) > 0 {
				dl.IDs = append([]uint32(nil), d.IDs...)
			}
			b.deliver(d.Sub, dl, &ps)
		}
	}
	for i := range ms.Shared {
		g := &ms.Shared[i]
		key := sharedKey(g.Group, g.Filter)
		if !contains(groups, key) {
			continue
		}
		if member := pickMember(g, nil); member != nil {
			dl := session.Delivery{Msg: m, QoS: min(m.QoS, member.Opts.QoS), Retain: m.Retain && member.Opts.RetainAsPublished, Shared: key}
			if member.Opts.ID != 0 {
				dl.IDs = []uint32{member.Opts.ID}
			}
			b.deliver(member.Sub, dl, &ps)
		}
	}
	b.matches.Put(ms)
	b.commitPersist(&ps)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// ApplyRetained applies a retained update replicated from another node if it
// is newer (by Stamp, then Origin) than the one held; it reports whether it
// was applied.
func (b *Broker) ApplyRetained(m *message.Message) bool {
	var ps session.Persist
	applied := b.retainIf(m, &ps, func(cur *message.Message) bool { return !newer(m, cur) })
	b.commitPersist(&ps)
	return applied
}

func newer(a, b *message.Message) bool {
	if a.Stamp != b.Stamp {
		return a.Stamp > b.Stamp
	}
	return strings.Compare(a.Origin, b.Origin) > 0
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
	b.restoreSubscriptions(s, st.Record.Subscriptions)
	b.noteArrival(id)
	s.RestoreInbound(st.Inbound)
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

// RetainedTombstones returns, once, the retained deletions loaded from the
// store (empty-payload messages with the cluster's stamp), for the cluster
// layer to keep enforcing them.
func (b *Broker) RetainedTombstones() []*message.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.mu.tombstones
	b.mu.tombstones = nil
	return t
}

// ForgetTombstone removes the stored tombstone of a retained deletion once
// the cluster no longer needs it, unless a message was retained since.
func (b *Broker) ForgetTombstone(topic string, stamp uint64) {
	if b.store == nil {
		return
	}
	var bt store.Batch
	bt.DeleteRetainedTombstone(topic, stamp)
	b.commitBehind(&bt)
}

// RetainedMessages calls fn for every retained message held, for a full
// retained sync with a node that joins.
func (b *Broker) RetainedMessages(fn func(*message.Message) bool) { b.retained.All(fn) }

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
