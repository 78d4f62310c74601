package directory

import (
	"context"
	"errors"
	"fmt"
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

// Serve answers a directory request from node (Peers.Call on node's side).
func (d *Service) Serve(ctx context.Context, node string, method byte, body []byte) ([]byte, error) {
	switch method {
	case methodRegister:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		return appendPrevious(nil, d.register(cl)), nil
	case methodRegisterClean:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		prev, superseded := d.registerClean(cl)
		return appendRegistered(nil, prev, superseded), nil
	case methodAssert:
		holder, ids, stamps, err := decodeAssert(body)
		if err != nil {
			return nil, err
		}
		return appendStringList(nil, d.assert(holder, ids, stamps)), nil
	case methodUnregister:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		d.unregister(cl)
		return nil, nil
	case methodDrop:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		d.drop(cl)
		return nil, nil
	case methodHandOver:
		id, clean, err := decodeHandOver(body)
		if err != nil {
			return nil, err
		}
		if clean {
			if _, err := d.sessions.HandOver(id, true); err != nil {
				return nil, fmt.Errorf("directory: hand-over of %q: %w", id, err)
			}
			return nil, nil
		}
		return d.export(node, id)
	case methodRelease:
		id, err := decodeClientID(body)
		if err != nil {
			return nil, err
		}
		d.release(node, id)
		return nil, nil
	case methodSettle:
		id, err := decodeClientID(body)
		if err != nil {
			return nil, err
		}
		return d.settled(id), nil
	case methodRestore:
		mine, prev, err := decodeRestore(body)
		if err != nil {
			return nil, err
		}
		d.restore(mine, prev)
		return nil, nil
	}
	return nil, fmt.Errorf("%w: unknown method %d from %s", ErrCorrupt, method, node)
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

// Owner returns the node that keeps clientID's directory entry when nodes
// are the alive members: the winner of rendezvous hashing.
func Owner(clientID string, nodes []string) string { return owner(clientID, nodes) }

// ownerOf returns the directory owner of clientID among the alive members.
func (d *Service) ownerOf(clientID string) string {
	return owner(clientID, d.aliveNodes())
}

// Takeover implements broker.Directory. It registers this node as the
// session's holder with the directory owner, and if another alive node held
// the session, asks it to hand the session over (closing the client's
// connection there). A clean start does both in the background
// (takeoverClean): nothing moves, so its CONNACK does not wait. Resuming
// fails, and the broker starts a fresh session, when the owner cannot be
// reached in time (the claim stays here, newer than any other, and the
// directory loop registers it once the owner is reachable); when the holder
// exported the session but its answer did not arrive, the error wraps
// broker.ErrSessionMoving and the CONNECT is refused instead.
func (d *Service) Takeover(ctx context.Context, clientID string, cleanStart bool) (*broker.SessionState, error) {
	if d.group.Stopped() {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	stamp := d.stamp()
	own := d.ownerOf(clientID)
	d.mu.Lock()
	d.mu.local[clientID] = localSession{stamp: stamp}
	d.mu.Unlock()
	mine := claim{ClientID: clientID, Node: d.id, Stamp: stamp}
	if cleanStart {
		// Nothing moves: the CONNECT need not wait for the directory.
		d.group.Go(func(ctx context.Context) { d.takeoverClean(ctx, own, mine) })
		return nil, nil
	}
	var prev claim
	if own == d.id {
		prev = d.register(mine)
	} else {
		out, err := d.peers.Call(ctx, own, methodRegister, appendClaim(nil, mine))
		if err == nil {
			prev, err = decodePrevious(out)
		}
		if err != nil {
			d.metrics.takeovers[takeoverFailed].Inc()
			d.Poke()
			return nil, fmt.Errorf("cluster: registering %q with %s: %w", clientID, own, err)
		}
	}
	d.mu.Lock()
	if ls, ok := d.mu.local[clientID]; ok && ls.stamp == stamp {
		d.mu.local[clientID] = localSession{owner: own, stamp: stamp}
	}
	d.mu.Unlock()
	if prev.Node == "" || prev.Node == d.id {
		d.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	if !d.alive(prev.Node) {
		d.log.Info("cluster: session's previous node is not alive; starting afresh", "client", clientID, "node", prev.Node)
		d.metrics.takeovers[takeoverLost].Inc()
		return nil, nil
	}
	out, err := d.askHandOver(ctx, prev.Node, clientID, false)
	var st *broker.SessionState
	if err == nil {
		st, err = decodeState(out)
	}
	if err != nil {
		d.metrics.takeovers[takeoverFailed].Inc()
		err = fmt.Errorf("cluster: hand-over of %q from %s: %w", clientID, prev.Node, err)
		if !errors.Is(err, peer.ErrLinkDown) && !errors.Is(err, context.DeadlineExceeded) {
			// The holder answered and cannot send the session (a retry
			// would fail the same way), or this node is stopping.
			return nil, err
		}
		d.abandon(own, mine, prev)
		return nil, fmt.Errorf("%w: %w", broker.ErrSessionMoving, err)
	}
	if st == nil {
		d.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	d.peers.Notify(prev.Node, methodRelease, appendClientID(nil, clientID))
	d.metrics.takeovers[takeoverMoved].Inc()
	return st, nil
}

// takeoverClean registers a clean start's claim in the background: the
// client already has its CONNACK. A session of the client on another node
// is then discarded there (its connection closed, its will published), a
// round trip after the new connection began rather than before it. If a
// newer claim reached the owner first, this node's session is the stale
// one, and the directory loop drops it; if the owner cannot be reached, the
// loop registers the claim later.
func (d *Service) takeoverClean(ctx context.Context, own string, mine claim) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	var prev claim
	var superseded bool
	if own == d.id {
		prev, superseded = d.registerClean(mine)
	} else {
		out, err := d.peers.Call(ctx, own, methodRegisterClean, appendClaim(nil, mine))
		if err == nil {
			prev, superseded, err = decodeRegistered(out)
		}
		if err != nil {
			d.log.Debug("cluster: registering a clean start failed; the directory loop retries", "client", mine.ClientID, "err", err)
			d.metrics.takeovers[takeoverFailed].Inc()
			d.Poke()
			return
		}
	}
	d.mu.Lock()
	if ls, ok := d.mu.local[mine.ClientID]; ok && ls.stamp == mine.Stamp && !superseded {
		d.mu.local[mine.ClientID] = localSession{owner: own, stamp: mine.Stamp}
	}
	d.mu.Unlock()
	switch {
	case superseded:
		d.Poke() // re-registering loses to the newer claim, which drops this copy
		return
	case prev.Node == "" || prev.Node == d.id:
		d.metrics.takeovers[takeoverNone].Inc()
		return
	case !d.alive(prev.Node):
		d.metrics.takeovers[takeoverLost].Inc()
		return
	}
	if _, err := d.askHandOver(ctx, prev.Node, mine.ClientID, true); err != nil {
		d.log.Info("cluster: discarding a clean start's old session failed", "client", mine.ClientID, "node", prev.Node, "err", err)
		d.metrics.takeovers[takeoverFailed].Inc()
		return
	}
	d.metrics.takeovers[takeoverNone].Inc()
}

// handOverRetry is the pause before asking a holder again after the link
// dropped the answer.
const handOverRetry = 100 * time.Millisecond

// askHandOver asks holder for clientID's session. An answer lost with its
// connection is asked for again (the holder keeps what it exported until
// released) until ctx ends or the holder is no longer alive.
func (d *Service) askHandOver(ctx context.Context, holder, clientID string, cleanStart bool) ([]byte, error) {
	req := appendHandOver(nil, clientID, cleanStart)
	for {
		out, err := d.peers.Call(ctx, holder, methodHandOver, req)
		if err == nil || !errors.Is(err, peer.ErrLinkDown) || !d.alive(holder) {
			return out, err
		}
		d.log.Info("cluster: hand-over answer lost with its link; asking again", "client", clientID, "node", holder)
		t := d.clock.NewTimer(handOverRetry)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (after the link dropped an answer)", ctx.Err())
		}
	}
}

// abandon undoes this node's claim after a hand-over that did not arrive:
// the claim it replaced stands again, so the client's retry (here or on
// any node) asks the holder again, which still has the session.
func (d *Service) abandon(own string, mine, prev claim) {
	d.mu.Lock()
	if ls, ok := d.mu.local[mine.ClientID]; ok && ls.stamp == mine.Stamp {
		delete(d.mu.local, mine.ClientID)
	}
	d.mu.Unlock()
	if own == d.id {
		d.restore(mine, prev)
	} else {
		d.peers.Notify(own, methodRestore, appendRestore(nil, mine, prev))
	}
}

// restore puts prev back as the directory entry if mine is still current.
func (d *Service) restore(mine, prev claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.mu.entries[mine.ClientID]; cur.node != mine.Node || cur.stamp != mine.Stamp {
		return
	}
	if prev.Node == "" {
		delete(d.mu.entries, mine.ClientID)
		return
	}
	d.mu.entries[mine.ClientID] = holding{node: prev.Node, stamp: prev.Stamp}
}

// export answers a hand-over request from node: the session's snapshot,
// kept here until node releases it.
func (d *Service) export(node, clientID string) ([]byte, error) {
	st, err := d.sessions.ExportSession(clientID)
	if err != nil {
		return nil, fmt.Errorf("cluster: hand-over of %q: %w", clientID, err)
	}
	if st == nil {
		return nil, nil
	}
	d.mu.Lock()
	d.mu.handing[clientID] = handing{to: node, st: st, at: d.clock.Now()}
	d.metrics.moving.Set(float64(len(d.mu.handing)))
	d.mu.Unlock()
	return appendState(nil, st), nil
}

// release ends a session exported to node, which now has it.
func (d *Service) release(node, clientID string) {
	d.mu.Lock()
	h, ok := d.mu.handing[clientID]
	if ok && h.to == node {
		delete(d.mu.handing, clientID)
		d.metrics.moving.Set(float64(len(d.mu.handing)))
	}
	d.mu.Unlock()
	if !ok || h.to != node {
		return
	}
	d.sessions.ReleaseSession(h.st)
	d.metrics.handOversOut.Inc()
}

// handingHold is how long an exported session waits for its release before
// its holder asks the new node what became of it.
func (d *Service) handingHold() time.Duration { return 2 * d.cfg.Timeout }

// settleHandings handles exports never released: either the release was
// lost (the new node has the session: the copy here is stale) or the new
// node abandoned the hand-over (the copy here is the session). The holder
// asks the new node whether it holds the session (methodSettle); until it
// can, it keeps its copy. A kept copy is registered again with a fresh
// claim, since the abandoned claim may still be the directory's entry if
// its restore was lost.
func (d *Service) settleHandings(ctx context.Context) {
	now := d.clock.Now()
	type due struct {
		id string
		h  handing
	}
	var work []due
	d.mu.Lock()
	for id, h := range d.mu.handing {
		if now.Sub(h.at) >= d.handingHold() {
			work = append(work, due{id, h})
		}
	}
	d.mu.Unlock()
	for _, w := range work {
		abandoned, err := d.askSettle(ctx, w.h.to, w.id)
		if err != nil {
			d.log.Debug("cluster: cannot settle a hand-over yet", "client", w.id, "node", w.h.to, "err", err)
			continue
		}
		d.mu.Lock()
		if cur, ok := d.mu.handing[w.id]; !ok || cur.at != w.h.at || cur.to != w.h.to {
			d.mu.Unlock()
			continue // asked for again, or released, meanwhile
		}
		delete(d.mu.handing, w.id)
		d.metrics.moving.Set(float64(len(d.mu.handing)))
		if abandoned {
			if _, ok := d.mu.local[w.id]; ok {
				d.mu.local[w.id] = localSession{stamp: d.stamp()} // registered by resync
			}
		}
		d.mu.Unlock()
		if abandoned {
			d.log.Info("cluster: a hand-over was abandoned; keeping the session here", "client", w.id, "node", w.h.to)
		} else {
			d.log.Info("cluster: a hand-over's release was lost; dropping the copy here", "client", w.id, "node", w.h.to)
			d.metrics.staleSessions.Inc()
			d.sessions.ReleaseSession(w.h.st)
		}
	}
}

// askSettle asks node whether the hand-over of clientID to it is
// abandoned: whether node does not hold the session. A node that is no
// longer alive cannot have the session in use: the copy here is kept.
func (d *Service) askSettle(ctx context.Context, node, clientID string) (abandoned bool, err error) {
	if !d.alive(node) {
		return true, nil
	}
	if !d.peers.Up(node) {
		return false, fmt.Errorf("no link to %s", node)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	out, err := d.peers.Call(ctx, node, methodSettle, appendClientID(nil, clientID))
	if err != nil {
		return false, err
	}
	if len(out) != 1 || out[0] > 1 {
		return false, fmt.Errorf("%w: settle answer", ErrCorrupt)
	}
	return out[0] == 1, nil
}

// settled answers a holder's methodSettle: 0 if the session is held here
// (the hand-over arrived and only its release was lost), 1 if not (it was
// abandoned, or has ended here since): the holder keeps its copy.
func (d *Service) settled(clientID string) []byte {
	if d.sessions.HoldsSession(clientID) {
		return []byte{0}
	}
	return []byte{1}
}

// SessionEnded implements broker.Directory: the owner forgets the entry if it
// still names this node.
func (d *Service) SessionEnded(clientID string) {
	if d.group.Stopped() {
		return
	}
	d.mu.Lock()
	ls, ok := d.mu.local[clientID]
	delete(d.mu.local, clientID)
	d.mu.Unlock()
	if !ok {
		return
	}
	cl := claim{ClientID: clientID, Node: d.id, Stamp: ls.stamp}
	own := d.ownerOf(clientID)
	if own == d.id {
		d.unregister(cl)
		return
	}
	d.peers.Notify(own, methodUnregister, appendClaim(nil, cl))
}

// register records a CONNECT's claim (it beats every earlier one) and
// returns the claim it replaced (Node "" if none).
func (d *Service) register(cl claim) claim {
	d.hlc.Observe(cl.Stamp)
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.mu.entries[cl.ClientID]
	d.mu.entries[cl.ClientID] = holding{node: cl.Node, stamp: cl.Stamp}
	return claim{ClientID: cl.ClientID, Node: prev.node, Stamp: prev.stamp}
}

// registerClean records a clean start's claim, registered after its
// CONNECT was answered, unless a newer claim got there first (superseded).
func (d *Service) registerClean(cl claim) (prev claim, superseded bool) {
	d.hlc.Observe(cl.Stamp)
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, ok := d.mu.entries[cl.ClientID]
	if ok && cur.stamp > cl.Stamp {
		return claim{}, true
	}
	d.mu.entries[cl.ClientID] = holding{node: cl.Node, stamp: cl.Stamp}
	return claim{ClientID: cl.ClientID, Node: cur.node, Stamp: cur.stamp}, false
}

// assert re-registers sessions a holder already has. A claim loses to a
// newer one of another alive node (it is returned as superseded); a claim
// that beats the entry's alive holder replaces it, and that holder is told
// to drop its stale copy.
func (d *Service) assert(holder string, ids []string, stamps []uint64) (superseded []string) {
	alive := d.aliveNodes()
	aliveSet := make(map[string]bool, len(alive))
	for _, n := range alive {
		aliveSet[n] = true
	}
	var drops []claim
	d.mu.Lock()
	for i, id := range ids {
		d.hlc.Observe(stamps[i])
		cur, ok := d.mu.entries[id]
		switch {
		case !ok || cur.node == holder || !aliveSet[cur.node]:
		case stamps[i] > cur.stamp:
			drops = append(drops, claim{ClientID: id, Node: cur.node, Stamp: cur.stamp})
		default:
			superseded = append(superseded, id)
			continue
		}
		d.mu.entries[id] = holding{node: holder, stamp: stamps[i]}
	}
	d.mu.Unlock()
	for _, dr := range drops {
		if dr.Node == d.id {
			d.drop(dr)
		} else {
			d.peers.Notify(dr.Node, methodDrop, appendClaim(nil, dr))
		}
	}
	return superseded
}

// unregister forgets a session if the entry is still that claim.
func (d *Service) unregister(cl claim) {
	d.mu.Lock()
	if cur := d.mu.entries[cl.ClientID]; cur.node == cl.Node && cur.stamp == cl.Stamp {
		delete(d.mu.entries, cl.ClientID)
	}
	d.mu.Unlock()
}

// drop discards the local session named by a superseded claim, unless it
// was claimed again since.
func (d *Service) drop(cl claim) {
	d.mu.Lock()
	ls, ok := d.mu.local[cl.ClientID]
	d.mu.Unlock()
	if ok && ls.stamp == cl.Stamp {
		d.discard(cl.ClientID)
	}
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
