package directory

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/cluster/hlc"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/run"
)

// Sessions is the node's sessions as the directory needs them: the broker.
type Sessions interface {
	// HandOver closes clientID's connection here and returns its session
	// for another node (nil if none), or discards it with cleanStart.
	HandOver(clientID string, cleanStart bool) (*broker.SessionState, error)
	// ExportSession snapshots a session for another node, keeping it here
	// offline until ReleaseSession.
	ExportSession(clientID string) (*broker.SessionState, error)
	ReleaseSession(st *broker.SessionState)
	// HoldsSession reports whether a session for clientID lives here.
	HoldsSession(clientID string) bool
	// SessionIDs lists the sessions held here, for registration at start.
	SessionIDs() []string
}

var _ Sessions = (*broker.Broker)(nil)

// Peers carries the directory's requests to other nodes: the peer links.
type Peers interface {
	// Call sends a request to node and waits for its answer (errors wrap
	// peer.ErrLinkDown when the connection ended first, peer.ErrNoLink
	// when there is no link to node).
	Call(ctx context.Context, node string, method byte, body []byte) ([]byte, error)
	// Notify sends a request whose answer is not wanted, if node's link is
	// connected.
	Notify(node string, method byte, body []byte) bool
	// Up reports whether node's link is connected.
	Up(node string) bool
}

var _ Peers = (*peer.Manager)(nil)

// Config configures a Service.
type Config struct {
	// NodeID is this node's id.
	NodeID   string
	Sessions Sessions
	Peers    Peers
	// Group runs the directory's background registrations (a clean start's
	// claim); its owner (the cluster layer) stops it and runs Run in it.
	Group *run.Group
	// Clock is the time source (default: the wall clock); HLC issues claim
	// stamps (shared with retained replication).
	Clock clock.Clock
	HLC   *hlc.Clock
	// Timeout bounds a session lookup and hand-over at CONNECT (default
	// 5 s; the broker's connect timeout bounds it too).
	Timeout time.Duration
	// ResyncInterval is how often the sessions not yet registered with
	// their owner are registered again (default 10 s); it also happens at
	// once after Poke.
	ResyncInterval time.Duration
	// Registerer receives the directory's metrics (nil: not exported).
	Registerer prometheus.Registerer
	// Log receives the directory's logs (default: discarded).
	Log *slog.Logger
}

// Service is this node's part of the session directory: the entries of the
// client ids it owns, the sessions it holds, and the hand-overs in flight.
// See the package doc.
type Service struct {
	// immutable after New
	cfg      Config
	id       string
	sessions Sessions
	peers    Peers
	group    *run.Group
	clock    clock.Clock
	hlc      *hlc.Clock
	log      *slog.Logger
	metrics  *dirMetrics
	wake     chan struct{} // cap 1: the loop should resynchronise

	members atomic.Pointer[[]string] // alive members with a peer address, this node included; sorted; replaced whole

	mu struct {
		sync.Mutex
		entries map[string]holding      // client id -> who holds it, for ids this node owns
		local   map[string]localSession // sessions held here
		handing map[string]handing      // sessions exported to another node, kept until it confirms
	}
}

var _ broker.Directory = (*Service)(nil)

// New creates the node's directory. It registers nothing until Start.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.HLC == nil {
		cfg.HLC = &hlc.Clock{}
	}
	if cfg.Group == nil {
		cfg.Group = run.NewGroup(context.Background())
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 10 * time.Second
	}
	d := &Service{
		cfg: cfg, id: cfg.NodeID, sessions: cfg.Sessions, peers: cfg.Peers, group: cfg.Group,
		clock: cfg.Clock, hlc: cfg.HLC, log: cfg.Log, metrics: newMetrics(cfg.Registerer),
		wake: make(chan struct{}, 1),
	}
	d.mu.entries = map[string]holding{}
	d.mu.local = map[string]localSession{}
	d.mu.handing = map[string]handing{}
	d.SetAlive([]string{d.id})
	return d
}

// Start takes the sessions the node loaded from its store as held here,
// with the oldest claim possible (stamp 0), for Run to register.
func (d *Service) Start() {
	ids := d.sessions.SessionIDs()
	d.mu.Lock()
	for _, id := range ids {
		if _, ok := d.mu.local[id]; !ok {
			d.mu.local[id] = localSession{}
		}
	}
	d.mu.Unlock()
}

// SetAlive replaces the alive members the directory is spread over (sorted,
// this node included) and makes the loop resynchronise.
func (d *Service) SetAlive(nodes []string) {
	cp := slices.Clone(nodes)
	d.members.Store(&cp)
	d.Poke()
}

func (d *Service) aliveNodes() []string { return *d.members.Load() }

// alive reports whether node is an alive member.
func (d *Service) alive(node string) bool {
	_, found := slices.BinarySearch(d.aliveNodes(), node)
	return found
}

// stamp returns a new claim stamp.
func (d *Service) stamp() uint64 { return d.hlc.Stamp(d.clock.Now()) }

// Forget drops the entries naming a node that is gone for good (it left,
// or was reaped).
func (d *Service) Forget(node string) {
	d.mu.Lock()
	for id, h := range d.mu.entries {
		if h.node == node {
			delete(d.mu.entries, id)
		}
	}
	d.mu.Unlock()
}

// assertBatch bounds the client ids re-registered in one request.
const assertBatch = 1024

// holding is a directory entry: who holds a session, since when.
type holding struct {
	node  string
	stamp uint64
}

// handing is a session exported to another node (to) and kept here, offline,
// until that node confirms it has it (methodRelease). If the answer was
// lost, the new node asks again and gets a fresh snapshot; if it never
// confirms, settleHandings asks it after handingHold which copy stands.
type handing struct {
	to string
	st *broker.SessionState
	at time.Time
}

// localSession is a session held here: the owner it is registered with
// ("" while not registered) and its claim stamp.
type localSession struct {
	owner string
	stamp uint64
}

// Poke makes the loop resynchronise at once: membership changed, or a link
// came up.
func (d *Service) Poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run keeps the directory consistent with membership until ctx ends: after
// a change (or a new link, or every ResyncInterval) it drops entries this
// node no longer owns and re-registers this node's sessions with owners
// that changed or could not be reached before; every ResyncInterval it also
// settles hand-overs never released.
func (d *Service) Run(ctx context.Context) {
	t := d.clock.NewTimer(d.cfg.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C():
			t.Reset(d.cfg.ResyncInterval)
			d.settleHandings(ctx)
		}
		d.resync(ctx)
	}
}

func (d *Service) resync(ctx context.Context) {
	alive := d.aliveNodes()
	type due struct {
		ids    []string
		stamps []uint64
	}
	work := map[string]*due{}
	d.mu.Lock()
	for id := range d.mu.entries {
		if owner(id, alive) != d.id {
			delete(d.mu.entries, id)
		}
	}
	for id, ls := range d.mu.local {
		if own := owner(id, alive); own != ls.owner {
			w := work[own]
			if w == nil {
				w = &due{}
				work[own] = w
			}
			w.ids = append(w.ids, id)
			w.stamps = append(w.stamps, ls.stamp)
		}
	}
	d.mu.Unlock()
	for own, w := range work {
		for len(w.ids) > 0 {
			n := min(len(w.ids), assertBatch)
			d.assertWith(ctx, own, w.ids[:n], w.stamps[:n])
			w.ids, w.stamps = w.ids[n:], w.stamps[n:]
		}
	}
}

// assertWith re-registers ids with their owner and discards the sessions
// that the owner says live elsewhere now.
func (d *Service) assertWith(ctx context.Context, own string, ids []string, stamps []uint64) {
	var superseded []string
	if own == d.id {
		superseded = d.assert(d.id, ids, stamps)
	} else {
		if !d.peers.Up(own) {
			return // retried on the next link-up or tick
		}
		ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
		out, err := d.peers.Call(ctx, own, methodAssert, appendAssert(nil, d.id, ids, stamps))
		cancel()
		if err != nil {
			d.log.Debug("cluster: re-registering sessions failed", "owner", own, "err", err)
			return
		}
		if superseded, err = decodeStringList(out); err != nil {
			d.log.Warn("cluster: bad answer to a re-registration", "owner", own, "err", err)
			return
		}
	}
	stale := make(map[string]bool, len(superseded))
	for _, id := range superseded {
		stale[id] = true
	}
	var drop []string
	d.mu.Lock()
	for i, id := range ids {
		ls, ok := d.mu.local[id]
		if !ok || ls.stamp != stamps[i] {
			continue // ended or claimed again meanwhile
		}
		if stale[id] {
			drop = append(drop, id)
			continue
		}
		d.mu.local[id] = localSession{owner: own, stamp: ls.stamp}
	}
	d.mu.Unlock()
	for _, id := range drop {
		d.discard(id)
	}
}

// discard ends a local session whose client has since connected to
// another node: its connection here (if any) is closed, its state dropped,
// and no will is published (the client is alive elsewhere).
func (d *Service) discard(clientID string) {
	d.log.Info("cluster: dropping a stale copy of a session held elsewhere", "client", clientID)
	d.metrics.staleSessions.Inc()
	if _, err := d.sessions.HandOver(clientID, false); err != nil {
		d.log.Warn("cluster: dropping a stale session", "client", clientID, "err", err)
	}
}
