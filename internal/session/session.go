package session

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/store"
)

// NeverExpire is the session expiry interval that means "never".
const NeverExpire = 0xFFFFFFFF

// Limits are the node-wide protocol limits a session enforces.
type Limits struct {
	MaxPacketSize     uint32
	ReceiveMaximum    uint16 // inbound QoS>0 publishes unacknowledged
	MaxInflight       uint16 // outbound window cap
	MaxQueued         int    // in-memory queue per session
	MaxStored         int    // on-disk queue per persistent session
	TopicAliasMaximum uint16
	MaxKeepAlive      uint16
	MaxSubscriptions  int
	MaxTopicLength    int
	MaxTopicLevels    int
	MaxClientIDLength int
	MaxSessionExpiry  uint32 // seconds, 0 = no cap
	ConnectTimeout    time.Duration
	WriteTimeout      time.Duration
	SlowConsumer      time.Duration
	AuthFailDelay     time.Duration // before a refusal for failed authentication
	PublishRate       int           // PUBLISH packets per second per client (0: unlimited)
	LimitLoopback     bool          // apply the publish limits to loopback clients too
	PublishBytes      int           // topic and payload bytes per second per client (0: unlimited)
	PublishDisconnect bool          // over a publish limit: disconnect (0x96/0x97) instead of pausing reads
}

// Persister is what a session needs from the store.
type Persister interface {
	Commit(ctx context.Context, b *store.Batch, done func(error)) error
	LoadMessagesFrom(clientID string, from uint64, limit int, fn func(*store.QueuedMessage) error) error
}

var _ Persister = (*store.Store)(nil)

// Env is what every session of one broker shares.
type Env struct {
	Clock   clock.Clock
	Log     *slog.Logger
	Metrics *metrics.Node
	Store   Persister // nil: nothing is persisted
	Limits  Limits
	Hub     Hub
	Auth    Authenticator // nil: every client is anonymous, with no access control
}

// SubRequest is one validated subscription request.
type SubRequest struct {
	Filter string // as subscribed, including any "$share/group/" prefix
	Opts   router.Options
	// From is the SUBSCRIBE's sx-from user property: where the history of
	// the sequenced topics the filter matches is replayed from.
	From From
}

// Hub is the broker as a session sees it.
type Hub interface {
	// Attach binds a connection that sent CONNECT to a session, creating the
	// session or taking it over from another connection. On failure s is nil
	// and code is the CONNACK reason code.
	Attach(c *Conn, p *packet.Connect) (s *Session, present bool, code packet.ReasonCode, reason string)
	// Publish routes m. ack (nil for QoS 0) is called exactly once with the
	// reason code for the acknowledgement, possibly from another goroutine.
	Publish(from *Session, m *message.Message, ack Acker)
	// Subscribe adds subscriptions and queues matching retained messages;
	// done receives one reason code per request.
	Subscribe(s *Session, reqs []SubRequest, done func([]packet.ReasonCode))
	// Unsubscribe removes subscriptions; done receives one code per filter.
	Unsubscribe(s *Session, filters []string, done func([]packet.ReasonCode))
	// Detach tells the broker that c, bound to s, has ended. publishWill
	// reports whether the will must be published (abnormal end, or
	// DISCONNECT 0x04).
	Detach(s *Session, c *Conn, publishWill bool)
}

// Acker receives the outcome of a publish: the reason code its
// acknowledgement carries. An interface rather than a closure so the hot
// path does not allocate one per message.
type Acker interface {
	Ack(code packet.ReasonCode)
}

// AckFunc adapts a function to Acker.
type AckFunc func(packet.ReasonCode)

func (f AckFunc) Ack(code packet.ReasonCode) { f(code) }

// Persist is what the deliveries of one publish share: the store writes
// they collect (a batch and the ticket that orders later deletions behind
// it, both allocated on first use, so a publish that persists nothing
// allocates neither), and the publishing session.
type Persist struct {
	Batch  *store.Batch
	Ticket *Ticket
	// From is the publishing session (nil: the broker itself). Deliveries
	// that find a connection's writer idle leave the write to From's reader,
	// which makes it inline once it has handled the packets of its read
	// (one write per subscriber per read, no goroutine hand-off).
	From *Session
}

// readerBatch is the open batch of the publishing session's reader, if any.
func (p *Persist) readerBatch() *batch {
	if p == nil || p.From == nil {
		return nil
	}
	return p.From.batch.Load()
}

// Add returns the batch to add operations to.
func (p *Persist) Add() *store.Batch { return p.batch() }

func (p *Persist) batch() *store.Batch {
	if p.Batch == nil {
		p.Batch = &store.Batch{}
		p.Ticket = &Ticket{}
	}
	return p.Batch
}

// Len is the number of store operations collected.
func (p *Persist) Len() int {
	if p.Batch == nil {
		return 0
	}
	return p.Batch.Len()
}

// Session is one client's MQTT session. See the package doc.
type Session struct {
	ID  string
	env *Env

	// batch is the current connection's reader batch (nil when offline),
	// for deliveries of the messages it publishes (see Persist.From).
	batch atomic.Pointer[batch]

	mu struct {
		sync.Mutex
		version packet.Version
		expiry  uint32 // session expiry interval, seconds
		subs    map[string]router.Options
		// subscribedAt: when the earliest subscription was made (stored
		// with the record; see store.SessionRecord.SubscribedAt).
		subscribedAt time.Time
		queue        ring
		inflight     inflight
		inbound      map[uint16]struct{} // QoS 2 ids received, PUBREL not yet
		seq          uint64              // last store sequence number used
		spilled      int                 // persisted messages not held in memory
		spillFrom    uint64              // lowest sequence number among them
		reloading    bool
		unsent       int // in-flight entries taken by takeHeldLocked not yet collected (at most)
		conn         *Conn
		will         *message.Message
		willDelay    uint32
		space        chan struct{} // closed when the queue gains room; nil when nobody waits
		ended        bool
		cursors      map[string]*cursor // by placement group (cursor.go); nil until the first

		// The identity of the latest connection and its rights, used for
		// the will; identified is false until a connection binds (a
		// session restored or moved here, not connected since).
		identified bool
		user       string
		rights     Authorizer
	}
}

// New returns an offline session.
func New(id string, env *Env, v packet.Version, expiry uint32) *Session {
	s := &Session{ID: id, env: env}
	s.mu.version = v
	s.mu.expiry = expiry
	s.mu.subs = map[string]router.Options{}
	return s
}

// Persistent reports whether the session outlives its connection.
func (s *Session) Persistent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.expiry > 0
}

// Expiry returns the session expiry interval in seconds.
func (s *Session) Expiry() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.expiry
}

// SetExpiry changes the session expiry interval (CONNECT or DISCONNECT).
func (s *Session) SetExpiry(e uint32) {
	s.mu.Lock()
	s.mu.expiry = e
	s.mu.Unlock()
}

// Version is the protocol version of the session's last connection.
func (s *Session) Version() packet.Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.version
}

// Conn returns the session's current connection, or nil when offline.
func (s *Session) Conn() *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.conn
}

// Bind makes c the session's connection. The connection sends nothing until
// its CONNACK is queued; unacknowledged messages are then sent again.
func (s *Session) Bind(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.s = s
	c.w.held = true
	s.mu.conn = c
	s.batch.Store(&c.rb)
	s.mu.identified, s.mu.user, s.mu.rights = true, c.id.User, c.id.Rights
	s.mu.version = c.version
	s.mu.ended = false
	if s.mu.inflight.unacked > 0 {
		c.w.resend = true
	}
}

// Unbind detaches c if it is still the session's connection and reports
// whether it was. Queued QoS 0 messages are discarded: they are not kept for
// an offline session.
func (s *Session) Unbind(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.conn != c {
		return false
	}
	s.mu.conn = nil
	s.batch.CompareAndSwap(&c.rb, nil)
	var keep ring
	for s.mu.queue.Len() > 0 {
		if d := s.mu.queue.PopFront(); d.QoS > 0 {
			keep.PushBack(d)
		} else {
			s.env.Metrics.QueuedMessages.Dec()
		}
	}
	s.mu.queue = keep
	s.wakeSpaceLocked()
	return true
}

// Online reports whether a connection is bound.
func (s *Session) Online() bool { return s.Conn() != nil }

// SetWill records the will of the current connection (nil clears it).
func (s *Session) SetWill(m *message.Message, delay uint32) {
	s.mu.Lock()
	s.mu.will, s.mu.willDelay = m, delay
	s.mu.Unlock()
}

// TakeWill returns and clears the will.
func (s *Session) TakeWill() (*message.Message, uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, d := s.mu.will, s.mu.willDelay
	s.mu.will, s.mu.willDelay = nil, 0
	return m, d
}

// Subscriptions returns a copy of the subscriptions the session holds.
func (s *Session) Subscriptions() map[string]router.Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]router.Options, len(s.mu.subs))
	for f, o := range s.mu.subs {
		out[f] = o
	}
	return out
}

// SubscriptionCount is the number of subscriptions held.
func (s *Session) SubscriptionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.subs)
}

// AddSubscription records a subscription; existed reports a replacement.
func (s *Session) AddSubscription(filter string, o router.Options) (existed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, existed = s.mu.subs[filter]
	s.mu.subs[filter] = o
	if s.mu.subscribedAt.IsZero() && s.env != nil && s.env.Clock != nil {
		s.mu.subscribedAt = s.env.Clock.Now()
	}
	return existed
}

// RemoveSubscription forgets a subscription.
func (s *Session) RemoveSubscription(filter string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.mu.subs[filter]
	delete(s.mu.subs, filter)
	return ok
}

// Record returns the session's durable record.
func (s *Session) Record(disconnectedAt time.Time) *store.SessionRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recordLocked(disconnectedAt)
}

func (s *Session) recordLocked(disconnectedAt time.Time) *store.SessionRecord {
	r := &store.SessionRecord{
		ClientID: s.ID, Version: byte(s.mu.version), ExpiryInterval: s.mu.expiry,
		DisconnectedAt: disconnectedAt,
	}
	for f, o := range s.mu.subs {
		r.Subscriptions = append(r.Subscriptions, store.SubscriptionRecord{
			Filter: f, QoS: o.QoS, NoLocal: o.NoLocal, RetainAsPublished: o.RetainAsPublished,
			RetainHandling: o.RetainHandling, ID: o.ID,
		})
	}
	if s.mu.will != nil {
		r.Will, r.WillDelay = s.mu.will, s.mu.willDelay
	}
	r.Cursors = s.cursorRecordsLocked()
	r.SubscribedAt = s.mu.subscribedAt
	return r
}

// SubscribedAt returns when the session's earliest subscription was made
// (zero: unknown).
func (s *Session) SubscribedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.subscribedAt
}

// RestoreSubscribedAt sets when a session loaded or moved here first
// subscribed, from its record (before its subscriptions are restored).
func (s *Session) RestoreSubscribedAt(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.IsZero() && (s.mu.subscribedAt.IsZero() || t.Before(s.mu.subscribedAt)) {
		s.mu.subscribedAt = t
	}
}

// End marks the session finished: further deliveries are refused and queued
// messages are released. It returns how many messages were discarded.
func (s *Session) End() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ended {
		return 0
	}
	s.mu.ended = true
	n := s.mu.queue.Len() + s.mu.inflight.unacked
	s.env.Metrics.QueuedMessages.Add(-int64(s.mu.queue.Len()))
	s.env.Metrics.InflightMessages.Add(-int64(s.mu.inflight.unacked))
	s.mu.queue = ring{}
	s.mu.inflight = inflight{}
	s.mu.subs = map[string]router.Options{}
	s.wakeSpaceLocked()
	return n
}

// Ended reports whether End was called.
func (s *Session) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.ended
}

// Outcome is the result of Deliver.
type Outcome int

const (
	Queued  Outcome = iota // held in memory for sending
	Spilled                // persisted, not held in memory
	Dropped                // dropped by the queue policy (counted)
	Full                   // non-persistent queue full of QoS 1/2: wait on the channel, then retry or give up
	Gone                   // the session has ended
	// Skipped: a record of a placement group the session's cursor has
	// passed, or whose live deliveries wait for the session's replay
	// (cursor.go); not counted as a drop.
	Skipped
)

// Ticket orders a publish's store writes before any later deletion of the
// same deliveries: a subscriber may acknowledge a message before the
// publisher's batch has been handed to the store, and the store applies
// batches in the order they are committed.
type Ticket struct {
	mu       sync.Mutex
	enqueued bool
	deferred store.Batch
	// waiting: sessions whose writer stopped at a held delivery of this
	// publish (writer.go), woken once the batch is handed to the store,
	// and again once it is durable.
	waiting []*Session
	// barrier: the store on which Committed queues an empty batch right
	// behind the publish's, to learn when it is durable (durable): set
	// when a delivery was taken into a window with its packet id in the
	// batch (takeHeldLocked).
	barrier Persister
	durable bool
}

// Committed marks the publish's batch as handed to the store and returns the
// deletions that were waiting for it (nil if none).
func (t *Ticket) Committed() *store.Batch {
	t.mu.Lock()
	t.enqueued = true
	waiting := t.waiting
	t.waiting = nil
	var b *store.Batch
	if t.deferred.Len() > 0 {
		d := t.deferred
		t.deferred = store.Batch{}
		b = &d
	}
	barrier := t.barrier
	t.mu.Unlock()
	kickWriters(waiting)
	if barrier != nil {
		// Queued at once, so that it is at the head of the store's next
		// group, not behind writes queued later (a deletion): the store
		// completes such a batch as soon as those before it.
		if err := barrier.Commit(context.Background(), &store.Batch{}, t.setDurable); err != nil {
			t.setDurable(err) // the store has failed for every session
		}
	}
	return b
}

// setDurable records that the publish's batch is durable (or cannot be:
// the store has failed, and the writers send anyway, as flushOpsDurable
// does) and kicks the writers waiting for it.
func (t *Ticket) setDurable(error) {
	t.mu.Lock()
	t.durable = true
	waiting := t.waiting
	t.waiting = nil
	t.mu.Unlock()
	kickWriters(waiting)
}

// waitDurable reports whether the publish's batch is durable; if not, s's
// writer is kicked once it is.
func (t *Ticket) waitDurable(s *Session) bool { return t.await(s, &t.durable) }

// waitFor reports whether the publish's batch has been handed to the
// store; if not, s's writer is kicked once it is.
func (t *Ticket) waitFor(s *Session) bool { return t.await(s, &t.enqueued) }

// await reports *reached (a field of t, read under its lock); if false,
// s waits among t.waiting for the next change.
func (t *Ticket) await(s *Session, reached *bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if *reached {
		return true
	}
	if !slices.Contains(t.waiting, s) {
		t.waiting = append(t.waiting, s)
	}
	return false
}

// kickWriters kicks the writers of sessions, woken from a ticket's wait.
func kickWriters(sessions []*Session) {
	for _, s := range sessions {
		s.kickWriter()
	}
}

// kickWriter makes the session's connection, if any, look for what it has
// to send.
func (s *Session) kickWriter() {
	s.mu.Lock()
	if c := s.mu.conn; c != nil {
		c.kickWriterLocked(nil)
	}
	s.mu.Unlock()
}

// deferDelete keeps a deletion until the ticket is committed; it reports
// false if the ticket is already committed (the caller commits itself).
func (t *Ticket) deferDelete(clientID string, seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.enqueued {
		return false
	}
	t.deferred.DeleteMessage(clientID, seq)
	return true
}

// Deliver offers d to the session. Persistent sessions add the QoS 1/2
// message to p (committed by the caller, then p.Ticket.Committed). See
// docs/design/broker.md for the queue policy. Before it reports Full (the
// caller is about to wait for room), the publisher's batch is written: the
// wait must not hold back deliveries already routed to others.
func (s *Session) Deliver(d Delivery, p *Persist) (Outcome, <-chan struct{}) {
	out, wait := s.deliver(d, p)
	if out == Full {
		if b := p.readerBatch(); b != nil {
			b.flush()
		}
	}
	return out, wait
}

func (s *Session) deliver(d Delivery, p *Persist) (Outcome, <-chan struct{}) {
	lim := &s.env.Limits
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ended {
		return Gone, nil
	}
	if d.Group != "" && !s.admitLocked(&d) {
		return Skipped, nil
	}
	if d.Group != "" && s.mu.cursors[d.Group] == nil && s.mu.expiry > 0 && s.env.Store != nil {
		// The session's first record of this group: its stored record
		// gets the cursor with this delivery's batch. Otherwise a crash
		// of the node while the session is online (its record is written
		// at disconnect, subscribe and unsubscribe) would leave it no
		// cursor on a group created after it subscribed, and what was
		// published while the node was down would never reach it; with
		// one, the backlog is replayed from there (what was taken since
		// may come again). Found by TestProcessSequencedChecker.
		defer func() {
			if c := s.mu.cursors[d.Group]; c != nil && p != nil {
				p.batch().PutSession(s.recordLocked(time.Time{}))
			}
		}()
	}
	if d.QoS == 0 {
		if s.mu.conn == nil {
			return Dropped, nil // QoS 0 is not queued for offline sessions
		}
		if s.mu.queue.Len() >= lim.MaxQueued && !s.dropOldestQoS0Locked() {
			s.env.Metrics.Drop(metrics.DropQueueFull, 1)
			return Dropped, nil
		}
		s.pushLocked(d, p.readerBatch())
		s.storeCursorLocked(&d, p)
		return Queued, nil
	}
	if s.mu.expiry > 0 && s.env.Store != nil {
		full := s.mu.spilled > 0 || s.mu.queue.Len() >= lim.MaxQueued
		if full && s.mu.spilled == 0 && s.dropOldestQoS0Locked() {
			full = false
		}
		if full && d.Replay {
			// A replay waits for room instead of spilling: the backlog
			// stays a cursor in the log, not a copy in the store.
			if s.mu.space == nil {
				s.mu.space = make(chan struct{})
			}
			return Full, s.mu.space
		}
		if full && s.mu.spilled >= lim.MaxStored {
			s.env.Metrics.Drop(metrics.DropSessionQuota, 1)
			return Dropped, nil
		}
		s.mu.seq++
		d.seq = s.mu.seq
		b := p.batch()
		d.ticket = p.Ticket
		// A record of a sequenced topic is sent only once this batch (its
		// stored copy, the cursor past it) and its sent state are durable:
		// see held deliveries (writer.go) and takeHeldLocked.
		d.hold = d.Group != ""
		if !full && d.hold && s.takeHeldLocked(d, p) {
			s.storeCursorLocked(&d, p)
			return Queued, nil
		}
		b.PutMessage(s.ID, d.record())
		if full {
			if s.mu.spilled == 0 {
				s.mu.spillFrom = d.seq
			}
			s.mu.spilled++
			s.passedLocked(&d)
			s.storeCursorLocked(&d, p)
			return Spilled, nil
		}
		s.pushLocked(d, p.readerBatch())
		s.storeCursorLocked(&d, p)
		return Queued, nil
	}
	if s.mu.queue.Len() >= lim.MaxQueued && !s.dropOldestQoS0Locked() && d.Msg.Publisher != s.ID {
		if c := s.mu.conn; c == nil || c.w.closing || c.w.gone {
			// Its connection is already being closed (a slow consumer cut
			// off, a takeover): nothing will make room, and the queue goes
			// with the session. Counted once more as the slow consumer's
			// loss, without holding the publisher back again.
			s.env.Metrics.Drop(metrics.DropSlowConsumer, 1)
			return Dropped, nil
		}
		if s.mu.space == nil {
			s.mu.space = make(chan struct{})
		}
		return Full, s.mu.space
	}
	// A client's own message is queued even past the bound: its publisher
	// is this session's reader, which must not wait for room that only the
	// acknowledgements it has yet to read can make. The overflow is bounded
	// by what the reader accepts before it stops (receive maximum, response
	// FIFO).
	s.pushLocked(d, p.readerBatch())
	return Queued, nil
}

// takeHeldLocked takes a held delivery straight into the outbound window
// when it is next to go (nothing queued or spilled before it, room in the
// window, a connection ready to send it): its packet id and sent state are
// written with its stored copy, in b (the publish's batch, which also
// carries the cursor past it), so one store commit, not two, comes before
// the socket (see writer.go, held deliveries); the writer sends it once
// that batch is durable (Ticket.waitDurable). It reports false, d not
// taken, otherwise.
func (s *Session) takeHeldLocked(d Delivery, p *Persist) bool {
	c := s.mu.conn
	if c == nil || c.w.held || c.w.resend || c.w.closing || c.w.gone || s.mu.queue.Len() > 0 || s.mu.spilled > 0 ||
		s.mu.inflight.Len() >= int(min(s.env.Limits.MaxInflight, c.clientRecvMax)) {
		return false
	}
	if d.Msg.Expired(s.env.Clock.Now()) || c.id.Rights != nil && !c.id.Rights.CanReceive(d.Msg.Topic) {
		return false // the writer drops it from the queue, counted
	}
	s.passedLocked(&d)
	d.state, d.unsent = stateWaitAck, true
	e := s.mu.inflight.Add(d)
	s.mu.unsent++
	s.env.Metrics.InflightMessages.Inc()
	p.batch().PutMessage(s.ID, e.record())
	t := p.Ticket
	t.mu.Lock()
	t.barrier = s.env.Store
	t.mu.Unlock()
	c.kickWriterLocked(p.readerBatch())
	return true
}

// pushLocked queues d; b (nil: none) is the publisher's batch, which may
// take on the write.
func (s *Session) pushLocked(d Delivery, b *batch) {
	s.passedLocked(&d)
	s.mu.queue.PushBack(d)
	s.env.Metrics.QueuedMessages.Inc()
	if c := s.mu.conn; c != nil {
		c.kickWriterLocked(b)
	}
}

// dropOldestQoS0Locked removes the oldest queued QoS 0 message, if any.
func (s *Session) dropOldestQoS0Locked() bool {
	for i := 0; i < s.mu.queue.Len(); i++ {
		if s.mu.queue.At(i).QoS == 0 {
			s.mu.queue.RemoveAt(i)
			s.env.Metrics.QueuedMessages.Dec()
			s.env.Metrics.Drop(metrics.DropQueueFull, 1)
			return true
		}
	}
	return false
}

func (s *Session) wakeSpaceLocked() {
	if s.mu.space != nil {
		close(s.mu.space)
		s.mu.space = nil
	}
}

// record converts a delivery to its stored form.
func (d *Delivery) record() *store.QueuedMessage {
	q := &store.QueuedMessage{
		Seq: d.seq, Msg: d.Msg, QoS: d.QoS, RetainFlag: d.Retain, SubIDs: d.IDs,
		PacketID: d.pid,
	}
	switch d.state {
	case stateWaitAck:
		q.State = store.SentAwaitingAck
	case stateWaitRel:
		q.State = store.ReleaseSent
	default:
		q.State = store.Queued
	}
	return q
}

// fromRecord rebuilds a delivery from its stored form.
func fromRecord(q *store.QueuedMessage) Delivery {
	// A QoS 2 message from the store (restored after a restart, reloaded
	// after a spill) is held like a live sequenced one: its packet id must
	// be durable before it is sent (held deliveries, writer.go). Its record
	// does not say whether it is a sequenced topic's.
	d := Delivery{Msg: q.Msg, QoS: q.QoS, Retain: q.RetainFlag, IDs: q.SubIDs, seq: q.Seq, pid: q.PacketID, hold: q.QoS == 2}
	switch q.State {
	case store.SentAwaitingAck:
		d.state, d.sentOnce = stateWaitAck, true
	case store.ReleaseSent:
		d.state, d.sentOnce = stateWaitRel, true
	}
	return d
}

// Restore loads a persisted delivery into a session being rebuilt from the
// store at start-up; messages must come in sequence order. Messages beyond
// the in-memory bound stay on disk.
func (s *Session) Restore(q *store.QueuedMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.Seq > s.mu.seq {
		s.mu.seq = q.Seq
	}
	d := fromRecord(q)
	if d.pid != 0 && d.state != stateQueued {
		s.mu.inflight.Restore(d)
		s.env.Metrics.InflightMessages.Inc()
		return
	}
	d.pid, d.state, d.sentOnce = 0, stateQueued, false
	if s.mu.spilled > 0 || s.mu.queue.Len() >= s.env.Limits.MaxQueued {
		if s.mu.spilled == 0 {
			s.mu.spillFrom = d.seq
		}
		s.mu.spilled++
		return
	}
	s.mu.queue.PushBack(d)
	s.env.Metrics.QueuedMessages.Inc()
}

// Export returns the messages the session holds in memory (in flight first,
// then queued, in order) and its inbound QoS 2 ids, for moving the session
// to another node. Messages spilled to disk are not included: the caller
// loads them from the store starting at SpillFrom.
func (s *Session) Export() (msgs []*store.QueuedMessage, inbound []uint16, spillFrom uint64, spilled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := func(d *Delivery) *store.QueuedMessage {
		q := d.record()
		q.Seq = uint64(len(msgs) + 1) // the receiving node numbers them again
		return q
	}
	s.mu.inflight.Each(func(d *Delivery) { msgs = append(msgs, next(d)) })
	for i := 0; i < s.mu.queue.Len(); i++ {
		msgs = append(msgs, next(s.mu.queue.At(i)))
	}
	for id := range s.mu.inbound {
		inbound = append(inbound, id)
	}
	return msgs, inbound, s.mu.spillFrom, s.mu.spilled
}

// RestoreInbound records inbound QoS 2 ids awaiting PUBREL.
func (s *Session) RestoreInbound(ids []uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.mu.inbound == nil {
			s.mu.inbound = map[uint16]struct{}{}
		}
		s.mu.inbound[id] = struct{}{}
	}
}

// Pending reports the queued, in-flight and spilled message counts.
func (s *Session) Pending() (queued, inflight, spilled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.queue.Len(), s.mu.inflight.unacked, s.mu.spilled
}

// TakeShared removes and returns the session's undelivered messages that
// came through shared subscriptions, so the broker can hand them to another
// member of the group (its connection ended with them unacknowledged).
func (s *Session) TakeShared() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Delivery
	for i := 0; i < s.mu.queue.Len(); {
		if d := s.mu.queue.At(i); d.Shared != "" && d.seq == 0 {
			out = append(out, s.mu.queue.RemoveAt(i))
			s.env.Metrics.QueuedMessages.Dec()
			continue
		}
		i++
	}
	var keep []Delivery
	for _, d := range s.mu.inflight.Drain() {
		if d.Shared != "" && d.seq == 0 && d.state == stateWaitAck {
			d.pid, d.state, d.sentOnce = 0, stateQueued, false
			out = append(out, d)
			s.env.Metrics.InflightMessages.Dec()
			continue
		}
		keep = append(keep, d)
	}
	for _, d := range keep {
		s.mu.inflight.Restore(d)
	}
	return out
}
