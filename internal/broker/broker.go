package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/retained"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/run"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// Store is what the broker needs from the node's durable store.
type Store interface {
	session.Persister
	LoadSessions(fn func(*store.SessionRecord) error) error
	LoadMessages(clientID string, fn func(*store.QueuedMessage) error) error
	LoadInbound(clientID string) ([]uint16, error)
	LoadRetained(fn func(*message.Message) error) error
}

var _ Store = (*store.Store)(nil)

// Config is the broker's part of the node configuration.
type Config struct {
	Limits         session.Limits
	MaxConnections int
	SysInterval    time.Duration // 0 disables $SYS
	Version        string
	Auth           session.Authenticator // nil: anonymous clients, no access control
}

// Broker is one node's MQTT hub. See the package doc.
type Broker struct {
	cfg     Config
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics.Node
	store   Store // nil: nothing persisted
	env     *session.Env
	started time.Time

	retained *retained.Index
	fanouts  sync.Pool // *fanout

	subs struct {
		sync.RWMutex
		ix *router.Index[*session.Session]
	}
	remote *Remote // nil on a node running alone; set before serving
	// sequencer takes the publishes of sequenced topics (nil: every topic
	// is direct); set before serving clients (SetSequencer, sequenced.go),
	// while the broker's own $SYS publisher may already run.
	sequencer atomic.Pointer[Sequencer]
	// localInterest follows local subscriptions for the delivery layer
	// (nil: nobody); set before serving (SetLocalInterest).
	localInterest Interest
	// restoredSince: per filter, the earliest SubscribedAt of the
	// sessions loaded from the store that subscribe to it; written by
	// load, read by SetLocalInterest, both before serving.
	restoredSince map[string]time.Time
	// replays is told of subscriptions and attached sessions (nil: no
	// sequenced topics); set before serving (SetReplays).
	replays Replays
	// observer is told of sequenced publishes, deliveries, subscriptions
	// and connections ending, for live placement (nil: nobody); set
	// before serving (SetObserver, observe.go).
	observer monitor.Observer

	moved movedSessions // relay.go: sessions released to another node

	mu struct {
		sync.Mutex
		sessions  map[string]*session.Session
		attaching map[string]chan struct{} // client ids with a CONNECT in progress
		timers    map[*session.Session]*timers
		conns     int
		online    int
		closing   bool
		// tombstones: retained deletions loaded from the store, until the
		// cluster layer takes them (RetainedTombstones).
		tombstones []*message.Message
	}

	// bg runs the $SYS loop; its context ends when Close begins.
	bg *run.Group
	// life bounds the broker's blocking calls (the store's queue, the
	// directory at CONNECT): it ends when Close gives up waiting for
	// connections, so that a stalled disk cannot hold them past shutdown.
	life    context.Context
	endLife context.CancelFunc
	connsWG sync.WaitGroup
}

type timers struct {
	expiry clock.Timer
	will   clock.Timer
}

// New creates a broker and loads the durable state from st (which may be
// nil for a broker that persists nothing).
func New(cfg Config, st Store, clk clock.Clock, log *slog.Logger, m *metrics.Node) (*Broker, error) {
	b := &Broker{
		cfg: cfg, clock: clk, log: log, metrics: m, store: st,
		retained: &retained.Index{}, started: clk.Now(), bg: run.NewGroup(context.Background()),
	}
	b.subs.ix = router.New[*session.Session]()
	b.mu.sessions = map[string]*session.Session{}
	b.mu.attaching = map[string]chan struct{}{}
	b.mu.timers = map[*session.Session]*timers{}
	b.fanouts.New = func() any { return new(fanout) }
	b.life, b.endLife = context.WithCancel(context.Background())
	b.env = &session.Env{Clock: clk, Log: log, Metrics: m, Limits: cfg.Limits, Hub: b, Auth: cfg.Auth}
	if st != nil {
		b.env.Store = st
		if err := b.load(); err != nil {
			return nil, fmt.Errorf("broker: loading state: %w", err)
		}
	}
	if cfg.SysInterval > 0 {
		b.bg.Go(b.sysLoop)
	}
	return b, nil
}

var _ session.Hub = (*Broker)(nil)

// ServeConn serves one client connection until it ends (listener.Handler).
// Connections that arrive once Close has begun are closed at once; the
// check and the Add are under b.mu so that every Add happens before Close's
// Wait (a WaitGroup must not be added to concurrently with Wait).
func (b *Broker) ServeConn(c net.Conn) {
	b.mu.Lock()
	if b.mu.closing {
		b.mu.Unlock()
		_ = c.Close()
		return
	}
	b.connsWG.Add(1)
	b.mu.Unlock()
	session.Serve(c, b.env, b.connsWG.Done)
}

// Attach implements session.Hub: find or create the session for a CONNECT,
// taking it over from another connection if needed.
func (b *Broker) Attach(c *session.Conn, p *packet.Connect) (*session.Session, bool, packet.ReasonCode, string) {
	id := p.ClientID
	for {
		b.mu.Lock()
		if b.mu.closing {
			b.mu.Unlock()
			return nil, false, packet.ServerUnavailable, "server shutting down"
		}
		wait, busy := b.mu.attaching[id]
		if !busy {
			// A client replacing its own live connection is no new
			// connection: refusing it would leave the client locked out
			// until the broker noticed the old one was dead.
			if b.mu.conns >= b.cfg.MaxConnections && !b.connectedLocked(id) {
				b.mu.Unlock()
				return nil, false, packet.ServerBusy, "too many connections"
			}
			b.mu.conns++
			b.mu.attaching[id] = make(chan struct{})
			b.mu.Unlock()
			break
		}
		b.mu.Unlock()
		<-wait // another CONNECT with this id is being handled
	}
	defer func() {
		b.mu.Lock()
		close(b.mu.attaching[id])
		delete(b.mu.attaching, id)
		b.mu.Unlock()
	}()

	// A client id last used by another user is not handed over, neither
	// here nor from another node.
	b.mu.Lock()
	prev := b.mu.sessions[id]
	b.mu.Unlock()
	if prev != nil && prev.ClaimedByOther(c) {
		b.mu.Lock()
		b.mu.conns--
		b.mu.Unlock()
		return nil, false, packet.NotAuthorized, "client identifier in use by another user"
	}

	var moved *SessionState
	if b.remote != nil {
		ctx, cancel := context.WithTimeout(b.life, b.cfg.Limits.ConnectTimeout)
		st, err := b.remote.Sessions.Takeover(ctx, id, p.CleanStart)
		cancel()
		if errors.Is(err, ErrSessionMoving) {
			b.log.Warn("session is moving from another node; refusing the CONNECT until it arrives", "client", id, "err", err)
			b.mu.Lock()
			b.mu.conns--
			b.mu.Unlock()
			return nil, false, packet.ServerUnavailable, "the session is moving from another node; try again"
		}
		if err != nil {
			b.log.Warn("session takeover from another node failed; starting a new session", "client", id, "err", err)
		}
		moved = st
	}

	b.mu.Lock()
	old := b.mu.sessions[id]
	b.mu.Unlock()
	if old != nil {
		if oc := old.Conn(); oc != nil {
			oc.Disconnect(packet.SessionTakenOver, "another connection took over the session")
			<-oc.Done()
		}
	}

	expiry := p.Props.SessionExpiry
	b.mu.Lock()
	old = b.mu.sessions[id]
	b.mu.Unlock()
	if old != nil && (p.CleanStart || old.Ended()) {
		// A will still pending from the previous connection goes now: the
		// session it was waiting on is being discarded.
		if w, _ := old.TakeWill(); w != nil {
			b.publishWill(old, w)
		}
		b.endSession(old)
		old = nil
	}
	s, present := old, old != nil
	if s != nil {
		b.stopTimers(s)
		s.SetExpiry(expiry)
	} else if moved != nil && !p.CleanStart {
		s = b.importSession(id, p.Version, expiry, moved)
		present = true
	} else {
		s = session.New(id, b.env, p.Version, expiry)
		b.mu.Lock()
		b.mu.sessions[id] = s
		b.mu.Unlock()
	}
	if moved != nil && moved.Release != nil {
		moved.Release() // the session and its interest are here: the old node may end its copy
	}
	s.Bind(c)
	b.mu.Lock()
	b.mu.online++
	b.mu.Unlock()
	b.updateSessionGauges()
	if expiry > 0 {
		b.persistSession(s, time.Time{}, nil)
	}
	if b.replays != nil {
		b.replays.Attached(s)
	}
	b.observeAttach(s)
	b.log.Info("client connected", "client", id, "remote", c.RemoteAddr().String(), "user", c.User(),
		"protocol", p.Version.String(), "keep_alive", p.KeepAlive, "clean_start", p.CleanStart,
		"session_expiry", expiry, "session_present", present)
	return s, present, packet.Success, ""
}

// connectedLocked reports whether client id has a connection bound. It
// takes the session's lock under b.mu; a session never calls the broker
// while holding its own lock, so the order cannot invert.
func (b *Broker) connectedLocked(id string) bool {
	s := b.mu.sessions[id]
	return s != nil && s.Online()
}

// Detach implements session.Hub: a connection bound to s has ended.
func (b *Broker) Detach(s *session.Session, c *session.Conn, publishWill bool) {
	b.log.Info("client disconnected", "client", s.ID, "remote", c.RemoteAddr().String(), "reason", c.EndReason(),
		"session_kept", s.Expiry() > 0)
	b.mu.Lock()
	b.mu.conns--
	b.mu.Unlock()
	if s.Expiry() == 0 && s.Conn() == c {
		// Out of the registry before the connection is unbound: a CONNECT
		// with this id that finds the session finds it still bound, and
		// waits for this connection to end, never a connection-less
		// session about to end that it would resume as present.
		b.deregister(s)
	}
	if !s.Unbind(c) {
		return
	}
	if o := b.observer; o != nil {
		o.Gone(s.ID)
	}
	b.mu.Lock()
	b.mu.online--
	b.mu.Unlock()
	will, delay := s.TakeWill()
	if !publishWill {
		will = nil
	}
	b.redistributeShared(s)
	expiry := s.Expiry()
	if expiry == 0 {
		b.endSession(s)
		if will != nil {
			b.publishWill(s, will)
		}
		b.updateSessionGauges()
		return
	}
	if will != nil && delay == 0 {
		b.publishWill(s, will)
		will = nil
	}
	if will != nil {
		s.SetWill(will, delay) // kept (and persisted) until it fires or the client returns
	}
	b.persistSession(s, b.clock.Now(), nil)
	b.armTimers(s, expiry, will, delay)
	b.updateSessionGauges()
}

// armTimers schedules the end of an offline session and its delayed will.
func (b *Broker) armTimers(s *session.Session, expiry uint32, will *message.Message, delay uint32) {
	t := &timers{}
	if expiry != session.NeverExpire {
		d := time.Duration(expiry) * time.Second
		t.expiry = b.clock.AfterFunc(d, func() { b.expire(s) })
	}
	if will != nil {
		d := time.Duration(delay) * time.Second
		if expiry != session.NeverExpire && expiry < delay {
			d = time.Duration(expiry) * time.Second // the will goes when the session ends, if sooner
		}
		t.will = b.clock.AfterFunc(d, func() {
			if s.Online() {
				return
			}
			if w, _ := s.TakeWill(); w != nil {
				b.publishWill(s, w)
				if s.Expiry() > 0 {
					b.persistSession(s, b.clock.Now(), nil)
				}
			}
		})
	}
	b.mu.Lock()
	b.mu.timers[s] = t
	b.mu.Unlock()
}

func (b *Broker) stopTimers(s *session.Session) {
	b.mu.Lock()
	t := b.mu.timers[s]
	delete(b.mu.timers, s)
	b.mu.Unlock()
	if t == nil {
		return
	}
	if t.expiry != nil {
		t.expiry.Stop()
	}
	if t.will != nil {
		t.will.Stop()
	}
}

// expire ends an offline session whose expiry interval has passed.
func (b *Broker) expire(s *session.Session) {
	if !b.offlineAndCurrent(s) {
		return
	}
	if w, _ := s.TakeWill(); w != nil {
		b.publishWill(s, w)
	}
	b.endSession(s)
	b.updateSessionGauges()
}

// offlineAndCurrent reports whether s has no connection and is still the
// session registered under its client id.
func (b *Broker) offlineAndCurrent(s *session.Session) bool {
	if s.Online() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.sessions[s.ID] == s
}

// endSession removes s from the registry and the index, discards its queue
// and deletes its durable state.
func (b *Broker) endSession(s *session.Session) {
	b.deregister(s)
	b.unindex(s, s.Subscriptions())
	b.retire(s)
}

// deregister stops s's timers and removes it from the registry.
func (b *Broker) deregister(s *session.Session) {
	b.stopTimers(s)
	b.mu.Lock()
	if b.mu.sessions[s.ID] == s {
		delete(b.mu.sessions, s.ID)
	}
	b.mu.Unlock()
}

// unindex removes s's subscriptions from the index.
func (b *Broker) unindex(s *session.Session, subs map[string]router.Options) {
	var changes []interestChange
	b.subs.Lock()
	for f := range subs {
		b.unsubscribeLocked(s, f, &changes)
	}
	n := b.subs.ix.Len()
	b.subs.Unlock()
	b.metrics.Subscriptions.Set(float64(n))
	b.announceInterest(changes)
}

// retire ends s, tells the directory and deletes its durable state.
func (b *Broker) retire(s *session.Session) {
	s.End()
	if b.remote != nil {
		b.remote.Sessions.SessionEnded(s.ID)
	}
	if b.store != nil {
		var bt store.Batch
		bt.DeleteSession(s.ID)
		b.commitBehind(&bt)
	}
}

// persistSession writes s's record; done (optional) runs once it is durable.
func (b *Broker) persistSession(s *session.Session, disconnectedAt time.Time, done func(error)) {
	if b.store == nil {
		if done != nil {
			done(nil)
		}
		return
	}
	var bt store.Batch
	bt.PutSession(s.Record(disconnectedAt))
	if done == nil {
		b.commitBehind(&bt)
		return
	}
	if err := b.commit(&bt, done); err != nil {
		done(err)
	}
}

// storeWaitTimeout bounds how long a broker call waits for room in the
// store's write queue: a disk that stalls longer fails the write (logged;
// a QoS 1/2 publish waiting on it is answered with 0x83) instead of
// holding the connection's reader without a deadline.
const storeWaitTimeout = 10 * time.Second

// commit queues bt on the store (done runs once it is durable), waiting at
// most storeWaitTimeout for room, and not past the broker's life.
func (b *Broker) commit(bt *store.Batch, done func(error)) error {
	ctx, cancel := context.WithTimeout(b.life, storeWaitTimeout)
	defer cancel()
	return b.store.Commit(ctx, bt, done)
}

func (b *Broker) commitBehind(bt *store.Batch) {
	if err := b.commit(bt, b.logStoreError); err != nil {
		b.log.Error("store write failed", "err", err)
	}
}

// publishWill publishes s's will if the session's identity (that of its
// latest connection) may publish to the will's topic now.
func (b *Broker) publishWill(s *session.Session, w *message.Message) {
	if !b.env.MayPublishWill(s, s.ID, w.Topic) {
		b.log.Info("will not published: not authorized", "client", s.ID, "topic", w.Topic)
		return
	}
	m := *w
	m.Created = b.clock.Now()
	if !w.Expiry.IsZero() && !w.Created.IsZero() {
		m.Expiry = m.Created.Add(w.Expiry.Sub(w.Created))
	}
	b.Publish(s, &m, nil)
}

func (b *Broker) updateSessionGauges() {
	b.mu.Lock()
	total, online := len(b.mu.sessions), b.mu.online
	b.mu.Unlock()
	b.metrics.SessionsCurrent.WithLabelValues("online").Set(float64(online))
	b.metrics.SessionsCurrent.WithLabelValues("offline").Set(float64(total - online))
}

// Stats is a snapshot of the broker's state for $SYS and the admin API.
type Stats struct {
	Uptime        time.Duration
	Connections   int
	Sessions      int
	Online        int
	Subscriptions int
	Retained      int
}

// Stats returns current counts.
func (b *Broker) Stats() Stats {
	b.mu.Lock()
	st := Stats{Connections: b.mu.conns, Sessions: len(b.mu.sessions), Online: b.mu.online}
	b.mu.Unlock()
	b.subs.RLock()
	st.Subscriptions = b.subs.ix.Len()
	b.subs.RUnlock()
	st.Retained = b.retained.Len()
	st.Uptime = b.clock.Now().Sub(b.started)
	return st
}

// ErrClosed is returned by operations on a closed broker.
var ErrClosed = errors.New("broker: closed")

// Close shuts the broker down gracefully: refuse new connections, send
// DISCONNECT 0x8B (server shutting down) to MQTT 5 clients, close every
// connection and persist session state. It returns when all connections have
// ended or ctx is done. The caller closes the store afterwards.
func (b *Broker) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.mu.closing {
		b.mu.Unlock()
		return nil
	}
	b.mu.closing = true
	var conns []*session.Conn
	for _, s := range b.mu.sessions {
		if c := s.Conn(); c != nil {
			conns = append(conns, c)
		}
	}
	b.mu.Unlock()
	b.bg.Stop()
	for _, c := range conns {
		c.Disconnect(packet.ServerShuttingDown, "server shutting down")
	}
	done := make(chan struct{})
	go func() { b.connsWG.Wait(); b.bg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		b.endLife() // what still waits on the store or the directory gives up
	}
	b.mu.Lock()
	var all []*session.Session
	for _, s := range b.mu.sessions {
		all = append(all, s)
	}
	b.mu.Unlock()
	for _, s := range all {
		b.stopTimers(s)
	}
	return err
}

// ClientInfo describes one connected client.
type ClientInfo struct {
	ID            string
	Remote        string
	Version       packet.Version
	RTT           time.Duration
	RTTSource     string
	Subscriptions int
	Persistent    bool
}

// Clients lists the connected clients, with their measured round-trip
// times (the input of client coordinates for placement).
func (b *Broker) Clients() []ClientInfo {
	b.mu.Lock()
	ss := make([]*session.Session, 0, b.mu.online)
	for _, s := range b.mu.sessions {
		ss = append(ss, s)
	}
	b.mu.Unlock()
	out := make([]ClientInfo, 0, len(ss))
	for _, s := range ss {
		c := s.Conn()
		if c == nil {
			continue
		}
		rtt, src := c.RTT()
		out = append(out, ClientInfo{
			ID: s.ID, Remote: c.RemoteAddr().String(), Version: c.Version(), RTT: rtt, RTTSource: src,
			Subscriptions: s.SubscriptionCount(), Persistent: s.Persistent(),
		})
	}
	return out
}
