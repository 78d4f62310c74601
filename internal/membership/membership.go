package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/hashicorp/serf/serf"

	"github.com/sextantmq/sextant/internal/coords"
)

// State is a member's liveness as this node sees it.
type State string

// There is no "suspect" state: memberlist v0.6.0 keeps suspicion in an
// unexported field (the exported Node.State is never set), so a member that
// misses probes shows as alive until it is declared failed.
const (
	StateAlive  State = "alive"
	StateFailed State = "failed"
	StateLeft   State = "left" // left gracefully (or is leaving)
)

// Member is one node of the cluster.
type Member struct {
	ID     string
	Labels Labels
	Addr   string // gossip address, ip:port
	State  State
	// Coordinate is the member's latest known Vivaldi coordinate, nil if
	// none is known yet. Treat it as read-only.
	Coordinate *coordinate.Coordinate
}

// EventType says what happened to a member.
type EventType int

const (
	EventJoin   EventType = iota + 1 // joined, or came back after failing
	EventLeave                       // left gracefully
	EventFail                        // declared failed
	EventUpdate                      // changed its labels
	EventReap                        // forgotten after failing or leaving
	// EventResync: events were dropped because the consumer fell behind;
	// re-read Members. Member is empty.
	EventResync
)

func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	case EventUpdate:
		return "update"
	case EventReap:
		return "reap"
	case EventResync:
		return "resync"
	}
	return "unknown(" + strconv.Itoa(int(t)) + ")"
}

// Event is one membership change.
type Event struct {
	Type   EventType
	Member Member
}

// Membership is this node's membership in the cluster.
type Membership struct {
	// immutable after Start
	id     string
	serf   *serf.Serf
	events chan Event
	stop   chan struct{}
	done   chan struct{}
	logger *slog.Logger
	known  *known // nil without Config.KnownFile; used by the pump alone

	dropped atomic.Uint64
	resync  atomic.Bool // set when an event was dropped; cleared by EventResync

	closeOnce sync.Once
	leaving   sync.WaitGroup
	// joinMu is held while a join contacts its addresses. Serf's Join
	// holds a lock of its own while it dials, for as long as an
	// unreachable address takes to time out; a second join is not queued
	// behind it (TryJoin skips, join retries after its backoff).
	joinMu sync.Mutex
}

// Start creates the local member and, if cfg.Join is not empty, joins the
// cluster through those addresses, retrying with backoff until one answers or
// ctx ends (then the member is shut down and the error returned).
func Start(ctx context.Context, cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	size := cfg.EventBuffer
	if size <= 0 {
		size = 256
	}
	// Serf writes events while holding its member lock, so the pump below
	// must always be draining this channel; the buffer only absorbs bursts.
	serfEvents := make(chan serf.Event, 64)
	sc, err := cfg.serfConfig(serfEvents, logger)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s, err := serf.Create(sc)
	if err != nil {
		return nil, fmt.Errorf("membership: start serf: %w", err)
	}
	m := &Membership{
		id:     cfg.NodeID,
		serf:   s,
		events: make(chan Event, size),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		logger: logger,
	}
	if cfg.KnownFile != "" {
		m.known = newKnown(cfg.KnownFile, cfg.NodeID, logger)
	}
	go m.pump(serfEvents)
	if len(cfg.Join) > 0 {
		if err := m.join(ctx, cfg.Join); err != nil {
			_ = m.Shutdown()
			return nil, err
		}
	}
	return m, nil
}

// The pause between join attempts doubles from joinBackoffMin to
// joinBackoffMax.
const (
	joinBackoffMin = 100 * time.Millisecond
	joinBackoffMax = 5 * time.Second
)

// join retries serf's join with backoff until one address answered. The
// first failure is a warning; the retries, which may go on for as long as
// the other nodes are away, are logged at debug level.
// errJoinBusy: another join was contacting its addresses.
var errJoinBusy = errors.New("membership: another join is running")

func (m *Membership) join(ctx context.Context, addrs []string) error {
	backoff := joinBackoffMin
	for attempt := 1; ; attempt++ {
		n, err := 0, errJoinBusy
		if m.joinMu.TryLock() {
			n, err = m.serf.Join(addrs, true)
			m.joinMu.Unlock()
		}
		if n > 0 {
			if attempt > 1 {
				m.logger.Info("membership: joined", "attempts", attempt)
			}
			return nil
		}
		lv := slog.LevelDebug
		if attempt == 1 {
			lv = slog.LevelWarn
		}
		m.logger.Log(ctx, lv, "membership: join failed; retrying until one of the addresses answers", "addrs", addrs, "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("membership: join %v: %w (last error: %w)", addrs, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// pump turns Serf's member events into Events, one per member. It never
// blocks on the consumer: a full Events channel drops the event and arms
// EventResync.
func (m *Membership) pump(in <-chan serf.Event) {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case e := <-in:
			me, ok := e.(serf.MemberEvent)
			if !ok {
				continue // user events and queries are not used
			}
			typ := eventTypeOf(me.Type)
			if typ == 0 {
				continue
			}
			for _, sm := range me.Members {
				e := Event{Type: typ, Member: m.member(sm)}
				m.logEvent(e)
				if m.known != nil {
					m.known.note(e)
				}
				m.emit(e)
			}
		}
	}
}

// logEvent tells the operator about another member's change, once per
// change (the library's own narration of it is at debug level).
func (m *Membership) logEvent(e Event) {
	mm := e.Member
	if mm.ID == m.id {
		return
	}
	switch e.Type {
	case EventJoin:
		m.logger.Info("cluster member joined", "member", mm.ID, "addr", mm.Addr, "site", mm.Labels.Site, "tier", mm.Labels.Tier)
	case EventLeave:
		m.logger.Info("cluster member left", "member", mm.ID, "addr", mm.Addr)
	case EventFail:
		m.logger.Warn("cluster member failed: it stopped answering gossip probes", "member", mm.ID, "addr", mm.Addr)
	case EventReap:
		m.logger.Info("cluster member forgotten: gone long enough, or removed by an operator", "member", mm.ID, "addr", mm.Addr)
	case EventUpdate:
		m.logger.Debug("cluster member changed its labels", "member", mm.ID)
	}
}

func (m *Membership) emit(e Event) {
	if m.resync.Load() {
		select {
		case m.events <- Event{Type: EventResync}:
			m.resync.Store(false)
		default:
			m.dropped.Add(1)
			return
		}
	}
	select {
	case m.events <- e:
	default:
		m.dropped.Add(1)
		m.resync.Store(true)
	}
}

func eventTypeOf(t serf.EventType) EventType {
	switch t {
	case serf.EventMemberJoin:
		return EventJoin
	case serf.EventMemberLeave:
		return EventLeave
	case serf.EventMemberFailed:
		return EventFail
	case serf.EventMemberUpdate:
		return EventUpdate
	case serf.EventMemberReap:
		return EventReap
	}
	return 0
}

// member converts a Serf member.
func (m *Membership) member(sm serf.Member) Member {
	out := Member{
		ID:     sm.Name,
		Labels: labelsOf(sm.Tags),
		Addr:   net.JoinHostPort(sm.Addr.String(), strconv.Itoa(int(sm.Port))),
	}
	switch sm.Status {
	case serf.StatusAlive:
		out.State = StateAlive
	case serf.StatusFailed:
		out.State = StateFailed
	default: // leaving, left
		out.State = StateLeft
	}
	out.Coordinate = m.coordinateOf(sm.Name)
	return out
}

func (m *Membership) coordinateOf(id string) *coordinate.Coordinate {
	if id == m.id {
		c, err := m.serf.GetCoordinate()
		if err != nil {
			return nil
		}
		return c
	}
	c, ok := m.serf.GetCachedCoordinate(id)
	if !ok {
		return nil
	}
	return c
}

// ID returns this node's id.
func (m *Membership) ID() string { return m.id }

// Members returns every member this node knows of, itself included, sorted
// by ID. Failed and left members stay listed until they are reaped.
func (m *Membership) Members() []Member {
	sms := m.serf.Members()
	out := make([]Member, 0, len(sms))
	for _, sm := range sms {
		if sm.Status == serf.StatusNone {
			continue
		}
		out = append(out, m.member(sm))
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Coordinate returns this node's current Vivaldi coordinate (a copy).
func (m *Membership) Coordinate() *coordinate.Coordinate {
	return m.coordinateOf(m.id)
}

// EstimateRTT estimates the round-trip time between members a and b from
// their coordinates, as placement does (coords.RTT: serf's distance,
// continuous where the adjustments would take off more than half of it).
// ok is false if either coordinate is unknown here.
func (m *Membership) EstimateRTT(a, b string) (time.Duration, bool) {
	ca, cb := m.coordinateOf(a), m.coordinateOf(b)
	if ca == nil || cb == nil || !ca.IsCompatibleWith(cb) {
		return 0, false
	}
	if a == b {
		return 0, true // a coordinate's distance to itself counts its height twice
	}
	return coords.RTT(ca, cb), true
}

// Events returns the stream of membership changes. See the package comment
// for what happens when the consumer falls behind.
func (m *Membership) Events() <-chan Event { return m.events }

// Dropped returns how many events were dropped because Events was full.
func (m *Membership) Dropped() uint64 { return m.dropped.Load() }

// SetLabels changes the labels this node announces; members see an
// EventUpdate.
func (m *Membership) SetLabels(l Labels) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if err := m.serf.SetTags(l.tags()); err != nil {
		return fmt.Errorf("membership: set tags: %w", err)
	}
	return nil
}

// Leave announces a graceful departure and waits for it to spread (bounded
// by the profile's broadcast timeout and propagation delay) or for ctx to
// end. Call Shutdown afterwards.
func (m *Membership) Leave(ctx context.Context) error {
	errc := make(chan error, 1)
	m.leaving.Add(1)
	go func() {
		defer m.leaving.Done()
		errc <- m.serf.Leave()
	}()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("membership: leave: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("membership: leave: %w", ctx.Err())
	}
}

// Shutdown stops gossip at once (other members will see this node fail
// unless it left first) and stops the event goroutine. It waits for a Leave
// still in progress.
func (m *Membership) Shutdown() error {
	var err error
	m.closeOnce.Do(func() {
		err = m.serf.Shutdown()
		m.leaving.Wait()
		close(m.stop)
		<-m.done
	})
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}
