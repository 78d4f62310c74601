package broker

import (
	"time"

	"context"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/retained"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// Forwarder hands a message published here to the other nodes with
// matching interest (the cluster layer's routing). served lists the shared
// groups ("$share/group/filter") that already had a member here, which the
// cluster must not serve again elsewhere; it is valid only during the call.
// Forward must not block for long: it queues the message on peer links.
type Forwarder interface {
	Forward(m *message.Message, served []string)
}

// Interest is told of every local subscription added (n = 1) or removed
// (n = -1), and at SetRemote of every subscription held (n = the count), by
// filter as subscribed ("$share/group/filter" for shared ones). It counts
// them; the broker does not (the peer layer keeps the one reference count,
// so reports that race still end right).
type Interest interface {
	AddInterest(filter string, n int)
}

// Replicator replicates retained updates made here (the cluster layer's
// retained replication).
type Replicator interface {
	// Stamp returns a hybrid logical clock time for a retained update.
	Stamp() uint64
	// Replicate sends a retained update (empty payload: deletion), already
	// applied here, to the other nodes.
	Replicate(m *message.Message)
}

// Directory is the cluster's session directory as the broker sees it.
type Directory interface {
	// Takeover is called when a client connects here: if its session lives
	// on another node, that node closes the client's connection there and
	// the session's state moves here (nil when there is none to move, or
	// cleanStart discards it). It also records this node as the session's
	// holder in the directory. It runs before CONNACK, bounded by ctx.
	Takeover(ctx context.Context, clientID string, cleanStart bool) (*SessionState, error)
	// SessionEnded tells the directory a session no longer lives here.
	SessionEnded(clientID string)
}

// Remote is the rest of the cluster as the broker sees it: this node's id
// and one small interface per concern, each implemented by a part of the
// cluster layer (package cluster and its sub-packages). A node running
// alone has none. The broker calls them without holding its own locks.
type Remote struct {
	// NodeID is this node's id, recorded as the Origin of local messages.
	NodeID    string
	Forwarder Forwarder
	Interest  Interest
	Retained  Replicator
	Sessions  Directory
	// Relay carries deliveries for sessions that moved away (relay.go);
	// nil: a released session ends at once.
	Relay Relay
}

// SetRemote connects the broker to the rest of the cluster. It must be
// called before the node serves clients; the broker then announces every
// subscription it holds (loaded from its store) through r.Interest.
func (b *Broker) SetRemote(r Remote) {
	b.remote = &r
	b.moved.relay = r.Relay
	for _, c := range b.allInterest() {
		r.Interest.AddInterest(c.filter, c.n)
	}
}

// SetLocalInterest gives i every subscription the broker holds, then every
// change, as SetRemote does for the cluster: the delivery layer follows
// which placement groups local subscribers may want, on a clustered node
// and on one running alone. It must be called before the node serves
// clients.
//
// If i is also an InterestSince, it is told, per filter, the earliest time
// a session loaded from the store subscribed to it: a persistent session
// has a cursor only on the groups it took a record of before its node
// stopped (or crashed), and the records of the others since it subscribed
// are its backlog too.
func (b *Broker) SetLocalInterest(i Interest) {
	b.localInterest = i
	for _, c := range b.allInterest() {
		i.AddInterest(c.filter, c.n)
	}
	if is, ok := i.(InterestSince); ok {
		for f, t := range b.restoredSince {
			is.InterestSince(f, t)
		}
	}
}

// InterestSince is an Interest told how far back the interest in a filter
// reaches (the sessions loaded from the store: when they subscribed).
type InterestSince interface {
	InterestSince(filter string, since time.Time)
}

// allInterest is every filter subscribed with its count.
func (b *Broker) allInterest() []interestChange {
	var all []interestChange
	b.subs.RLock()
	b.subs.ix.Filters(func(f string, n int) { all = append(all, interestChange{f, n}) })
	b.subs.RUnlock()
	return all
}

// interestChange is one subscription added (+1) or removed (-1) for a
// filter, collected under b.subs and announced after it is released.
type interestChange struct {
	filter string
	n      int
}

// noteInterest collects a change for announceInterest when someone
// follows interest (the cluster, the delivery layer).
func (b *Broker) noteInterest(filter string, n int, out *[]interestChange) {
	if b.remote != nil || b.localInterest != nil {
		*out = append(*out, interestChange{filter, n})
	}
}

func (b *Broker) announceInterest(ch []interestChange) {
	for _, c := range ch {
		if b.remote != nil {
			b.remote.Interest.AddInterest(c.filter, c.n)
		}
		if b.localInterest != nil {
			b.localInterest.AddInterest(c.filter, c.n)
		}
	}
}

// DeliverForwarded delivers a message another node forwarded here to local
// subscribers only: to direct subscribers when direct is set, and to one
// member of each shared group listed in groups. It is never forwarded again.
func (b *Broker) DeliverForwarded(m *message.Message, direct bool, groups []string) {
	var ps session.Persist
	f := b.fanouts.Get().(*fanout)
	b.route(m, nil, scope{direct: direct, groups: groups}, f)
	b.fanOut(f.rs, &ps)
	b.putFanout(f)
	b.commitPersist(&ps)
}

// ApplyRetained applies a retained update replicated from another node if it
// is newer (by Stamp, then Origin) than the one held; it reports whether it
// was applied.
func (b *Broker) ApplyRetained(m *message.Message) bool {
	var ps session.Persist
	applied := b.retainIf(m, &ps, func(cur *message.Message) bool { return !retained.Newer(m, cur.Stamp, cur.Origin) })
	b.commitPersist(&ps)
	return applied
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
