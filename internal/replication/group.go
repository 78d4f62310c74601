package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"

	"github.com/sextantmq/sextant/internal/logging"
)

// Group is this node's replica of a replicated group: a Raft instance with
// its log (raft-wal) and snapshots in the group's directory, its stream
// layer on the engine's listener, and the state machine it applies. Every
// method is safe for concurrent use.
type Group[R any] struct {
	// immutable after OpenGroup
	id       GroupID
	e        *Engine
	log      *slog.Logger
	raft     *raft.Raft
	wal      *wal.WAL
	layer    *layer
	trans    *raft.NetworkTransport
	machine  *machine[R]
	behind   *behindLog
	queue    chan *Pending[R] // Submit -> dispatcher
	inflight chan inflight[R] // dispatcher -> completer
	leaderCh chan Leader      // cap 1: the newest unread leader
	obsCh    chan raft.Observation
	stopProp chan struct{} // closed by Close: the dispatcher stops
	stopObs  chan struct{} // closed by Close after Raft stopped: the watcher stops

	propWG  sync.WaitGroup // dispatcher and completer
	obsWG   sync.WaitGroup // watcher
	awaitWG sync.WaitGroup // goroutines waiting on Raft futures for control calls
	senders sync.WaitGroup // Submit calls between their closed check and their enqueue

	mu struct {
		sync.Mutex
		closed  bool
		failure error // why the state machine failed, if it did
	}
}

// inflight is a command handed to Raft.
type inflight[R any] struct {
	p *Pending[R]
	f raft.ApplyFuture
}

var _ member = (*Group[int])(nil)

// OpenGroup opens (or creates) this node's replica of group id on e, with
// fsm as its state machine, and starts it. A new group has no members: call
// Bootstrap on each initial voter, or have the leader of an existing group
// add this replica (AddLearner, then Promote). A reopened group resumes
// from its storage: it restores its newest snapshot unless fsm already
// holds the state it covers, and Raft replays the log after it, skipping
// entries at or below fsm.Applied(). ctx bounds OpenGroup only.
func OpenGroup[R any](ctx context.Context, e *Engine, id GroupID, fsm FSM[R]) (g *Group[R], err error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if fsm == nil {
		return nil, fmt.Errorf("%w: group %s: nil state machine", ErrConfig, id)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.reserve(id); err != nil {
		return nil, err
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for _, c := range slices.Backward(closers) {
				_ = c()
			}
			e.release(id, nil)
		}
	}()
	cfg := e.cfg
	log := e.log.With("group", string(id))
	dir := e.GroupDir(id)
	walDir := filepath.Join(dir, "wal")
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		return nil, fmt.Errorf("replication: group %s: %w", id, err)
	}
	w, err := wal.Open(walDir, wal.WithLogger(logging.Hclog(log, "wal", e.repeats)), wal.WithSegmentSize(cfg.SegmentBytes),
		wal.WithSegmentFiler(segment.NewFiler(walDir, newDirectFS())),
		wal.WithMetricsCollector(walCollector{e.metrics}))
	if err != nil {
		return nil, fmt.Errorf("replication: group %s: open log: %w", id, err)
	}
	closers = append(closers, w.Close)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, logging.Hclog(log, "snapshots", e.repeats))
	if err != nil {
		return nil, fmt.Errorf("replication: group %s: open snapshots: %w", id, err)
	}
	restore, err := restoreOnStart(fsm, w, snaps)
	if err != nil {
		return nil, fmt.Errorf("replication: group %s: %w", id, err)
	}

	ly := newLayer(cfg.NodeID, cfg.Addr, id, cfg.Dial, cfg.TLS)
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  ly,
		MaxPool: 3,
		Timeout: transportTimeout,
		// Not the library's pipelined replication: after a follower's
		// failed append (Success=false) its decoder stops while the
		// sender may be parked on a full in-progress channel that only
		// it would close, so the leader stops sending that follower
		// entries (heartbeats go on, so no election heals it) and its
		// Shutdown waits forever (hashicorp/raft#612; found by
		// clustertest.TestSequencedChecker). groupTransport pipelines
		// instead, with a pipeline that fails over cleanly (pipeline.go).
		MaxRPCsInFlight: 1,
		Logger:          logging.Hclog(log, "raft-net", e.repeats),
	})
	closers = append(closers, trans.Close)

	g = &Group[R]{
		id: id, e: e, log: log, wal: w, layer: ly, trans: trans,
		queue:    make(chan *Pending[R], cfg.QueueDepth),
		inflight: make(chan inflight[R], cfg.QueueDepth),
		leaderCh: make(chan Leader, 1),
		obsCh:    make(chan raft.Observation, 16),
		stopProp: make(chan struct{}),
		stopObs:  make(chan struct{}),
	}
	rc := raftConfig(cfg, logging.Hclog(log, "raft", e.repeats))
	rc.NoSnapshotRestoreOnStart = !restore
	var store raft.LogStore = timedLog{WAL: w, metrics: e.metrics}
	if e.wrapLog != nil {
		store = e.wrapLog(id, store)
	}
	// The leader's own appends are written behind (behind.go): its write
	// and fsync run while the followers write theirs. A failed write
	// behind stops the group as a failed state machine does: entries Raft
	// counts as stored may not be.
	behind, err := newBehindLog(store, g.onFail)
	if err != nil {
		return nil, fmt.Errorf("replication: group %s: %w", id, err)
	}
	closers = append(closers, behind.Close)
	g.behind = behind
	g.machine = newMachine(fsm, e.metrics, g.onFail, behind.waitDurable)
	gt := &groupTransport{NetworkTransport: trans, layer: ly, metrics: e.metrics, depth: cfg.Pipeline, timeout: transportTimeout, clamp: behind.clamp}
	// The leader reads back what it just appended to send it to the
	// followers; the cache answers those reads without a system call each.
	logs, err := raft.NewLogCache(2*cfg.MaxBatch, behind)
	if err != nil {
		return nil, fmt.Errorf("replication: group %s: log cache: %w", id, err)
	}
	r, err := raft.NewRaft(rc, g.machine, logs, w, snaps, gt)
	if err != nil {
		return nil, fmt.Errorf("replication: group %s: start raft: %w", id, err)
	}
	g.raft = r
	behind.setLeading(func() bool { return r.State() == raft.Leader })
	r.RegisterObserver(raft.NewObserver(g.obsCh, true, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	}))
	g.propWG.Add(2)
	go g.dispatch()
	go g.complete()
	g.obsWG.Add(1)
	go g.watch()
	if !e.publish(id, g) {
		closers = nil // Close closes everything
		_ = g.Close()
		return nil, ErrClosed
	}
	return g, nil
}

// restoreOnStart decides whether Raft restores the newest snapshot into fsm
// when the group starts: only if fsm does not already hold the state the
// snapshot covers (a durable state machine usually does; restoring would
// roll it back and apply the entries after the snapshot again).
func restoreOnStart[R any](fsm FSM[R], logs raft.LogStore, snaps raft.SnapshotStore) (bool, error) {
	applied := fsm.Applied()
	snapApplied, has, err := snapshotApplied(snaps)
	if err != nil {
		return false, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return false, fmt.Errorf("replication: read log: %w", err)
	}
	if applied > max(last, snapApplied) {
		return false, fmt.Errorf("%w: state machine at index %d, beyond its log (%d) and snapshot (%d)", ErrCorrupt, applied, last, snapApplied)
	}
	return has && applied < snapApplied, nil
}

func raftConfig(cfg Config, logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = logger
	t := cfg.Timeouts
	rc.HeartbeatTimeout = t.Heartbeat
	rc.ElectionTimeout = t.Election
	rc.LeaderLeaseTimeout = t.LeaderLease
	rc.CommitTimeout = t.Commit
	// Many proposals share one log write and fsync, one AppendEntries per
	// follower and one state machine batch: the leader takes every
	// proposal waiting in its (buffered) apply channel, up to MaxBatch.
	rc.MaxAppendEntries = cfg.MaxBatch
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	// A removed replica stays open (RoleNone) until its owner closes or
	// deletes it: Raft shutting itself down would strand the answers of
	// proposals still queued inside it.
	rc.ShutdownOnRemove = false
	rc.NoLegacyTelemetry = true
	return rc
}

// ID returns the group's id.
func (g *Group[R]) ID() GroupID { return g.id }

func (g *Group[R]) streams() *layer { return g.layer }

// Submit queues cmd for the log; see Replica. It fails at once with a
// *NotLeaderError on a replica that does not lead. While the queue is full
// (Config.QueueDepth) it waits, until ctx ends.
func (g *Group[R]) Submit(ctx context.Context, cmd []byte) (*Pending[R], error) {
	if err := ctx.Err(); err != nil {
		g.count(resultCanceled)
		return nil, err
	}
	g.mu.Lock()
	if g.mu.closed {
		err := g.closedLocked()
		g.mu.Unlock()
		g.count(resultClosed)
		return nil, err
	}
	g.senders.Add(1)
	g.mu.Unlock()
	defer g.senders.Done()
	if g.raft.State() != raft.Leader {
		g.count(resultNotLeader)
		return nil, g.notLeader()
	}
	p := newPending[R](cmd, time.Now())
	select {
	case g.queue <- p:
		return p, nil
	case <-ctx.Done():
		g.count(resultCanceled)
		return nil, ctx.Err()
	case <-g.stopProp:
		g.count(resultClosed)
		return nil, g.closedErr()
	}
}

// Propose commits cmd and returns the state machine's result on this
// replica, the leader; see Pending.Wait for the errors.
func (g *Group[R]) Propose(ctx context.Context, cmd []byte) (R, error) {
	p, err := g.Submit(ctx, cmd)
	if err != nil {
		var zero R
		return zero, err
	}
	res, err := p.Wait(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		g.count(resultCanceled)
	}
	return res, err
}

// dispatch hands queued commands to Raft in queue order.
func (g *Group[R]) dispatch() {
	defer g.propWG.Done()
	defer close(g.inflight)
	for {
		select {
		case p := <-g.queue:
			g.inflight <- inflight[R]{p: p, f: g.raft.Apply(p.cmd, 0)}
		case <-g.stopProp:
			g.senders.Wait()
			err := g.closedErr()
			for {
				select {
				case p := <-g.queue:
					g.count(resultClosed)
					var zero R
					p.resolve(zero, err)
				default:
					return
				}
			}
		}
	}
}

// complete waits for Raft's answers in submission order (Raft answers
// roughly in that order) and hands them to the callers.
func (g *Group[R]) complete() {
	defer g.propWG.Done()
	for in := range g.inflight {
		var out outcome[R]
		if err := in.f.Error(); err != nil {
			out.err = g.mapErr(err)
		} else if o, ok := in.f.Response().(outcome[R]); ok {
			out = o
		} else {
			out.err = fmt.Errorf("replication: group %s: no result for the command (response %T)", g.id, in.f.Response())
		}
		switch {
		case out.err == nil:
			g.e.metrics.commit.Observe(time.Since(in.p.start).Seconds())
			g.count(resultOK)
		case errors.Is(out.err, ErrFailed):
			g.count(resultFailed)
		case errors.Is(out.err, ErrNotLeader):
			g.count(resultNotLeader)
		case errors.Is(out.err, ErrUnknownOutcome):
			g.count(resultUnknown)
		default:
			g.count(resultClosed)
		}
		in.p.resolve(out.res, out.err)
	}
}

func (g *Group[R]) count(result string) { g.e.metrics.proposals[result].Inc() }

// mapErr classifies Raft's errors into this package's.
func (g *Group[R]) mapErr(err error) error {
	switch {
	case errIs(err, raft.ErrNotLeader, raft.ErrLeadershipTransferInProgress, raft.ErrNotVoter):
		return g.notLeader()
	case errIs(err, raft.ErrLeadershipLost, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: group %s: %w", ErrUnknownOutcome, g.id, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return g.closedErr()
	}
	return fmt.Errorf("replication: group %s: %w", g.id, err)
}

func (g *Group[R]) notLeader() error { return &NotLeaderError{Group: g.id, Leader: g.Leader()} }

func (g *Group[R]) closedErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closedLocked()
}

func (g *Group[R]) closedLocked() error { return stoppedErr(g.id, g.mu.failure) }

// stoppedErr is the error for a command to a stopped group: ErrFailed with
// the state machine's (or the leader's log write's) error if that stopped
// it, else ErrClosed.
func stoppedErr(id GroupID, failure error) error {
	if failure != nil {
		return fmt.Errorf("%w: group %s: %w", ErrFailed, id, failure)
	}
	return fmt.Errorf("%w: group %s", ErrClosed, id)
}

// onFail runs on Raft's FSM goroutine when the state machine reports a
// fatal error, or on the log's writer when the leader's write behind
// failed: the group records why and closes (on another goroutine, since
// closing waits for the FSM goroutine and the writer).
func (g *Group[R]) onFail(err error) {
	g.log.Error("replication: the group failed; closing it", "err", err)
	g.mu.Lock()
	g.mu.failure = err
	g.mu.Unlock()
	g.e.spawn(func() { _ = g.Close() })
}

// watch turns Raft's leadership observations into Leadership
// notifications, metrics and log lines.
func (g *Group[R]) watch() {
	defer g.obsWG.Done()
	var last Leader
	for {
		select {
		case <-g.obsCh:
		case <-g.stopObs:
			return
		}
		cur := g.Leader()
		if cur == last {
			continue
		}
		switch {
		case cur.Local && !last.Local:
			g.e.metrics.leaderChanges.Inc()
			g.log.Info("replication: leading the group", "term", cur.Term)
		case last.Local && !cur.Local:
			g.log.Info("replication: no longer leading the group", "leader", cur.ID, "term", cur.Term)
		}
		last = cur
		// Newest wins: the owner wants the current leader, not the
		// history. This goroutine is the only sender, so after the drain
		// the send cannot block.
		select {
		case <-g.leaderCh:
			g.e.metrics.coalesced.Inc()
		default:
		}
		g.leaderCh <- cur
	}
}

// Leader returns the leader this replica knows of.
func (g *Group[R]) Leader() Leader {
	addr, id := g.raft.LeaderWithID()
	if id == "" {
		return Leader{}
	}
	_, a := splitAddress(addr)
	return Leader{
		ID: string(id), Addr: a, Term: g.raft.CurrentTerm(),
		Local: string(id) == g.e.cfg.NodeID && g.raft.State() == raft.Leader,
	}
}

// IsLeader reports whether this replica leads the group.
func (g *Group[R]) IsLeader() bool { return g.raft.State() == raft.Leader }

// Leadership delivers the leader each time it changes, as this replica
// learns it (including "none known" during an election). The channel holds
// one value: a newer notification replaces an unread older one (counted in
// sextant_replication_leadership_notifications_coalesced_total), so a slow
// reader sees the latest state, never a backlog. It is never closed.
func (g *Group[R]) Leadership() <-chan Leader { return g.leaderCh }

// role is this replica's role, from Raft's state and latest configuration.
func (g *Group[R]) role() Role {
	switch g.raft.State() {
	case raft.Leader:
		return RoleLeader
	case raft.Candidate:
		return RoleCandidate
	case raft.Shutdown:
		return RoleShutdown
	}
	for _, s := range g.configuration().Servers {
		if s.ID == raft.ServerID(g.e.cfg.NodeID) {
			if s.Suffrage == raft.Voter {
				return RoleFollower
			}
			return RoleLearner
		}
	}
	return RoleNone
}

func (g *Group[R]) configuration() raft.Configuration {
	f := g.raft.GetConfiguration() // answered at once from Raft's latest configuration
	if f.Error() != nil {
		return raft.Configuration{}
	}
	return f.Configuration()
}

// Members returns the latest configuration (possibly not committed yet),
// sorted by id.
func (g *Group[R]) Members() []Member {
	var out []Member
	for _, s := range g.configuration().Servers {
		_, addr := splitAddress(s.Address)
		out = append(out, Member{ID: string(s.ID), Addr: addr, Voter: s.Suffrage == raft.Voter})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Stats returns the replica's figures.
func (g *Group[R]) Stats() Stats {
	st := Stats{
		Group: g.id, Role: g.role(), Leader: g.Leader(),
		Term: g.raft.CurrentTerm(), LastIndex: g.raft.LastIndex(), CommitIndex: g.raft.CommitIndex(),
		Applied: g.machine.applied.Load(), Members: g.Members(),
		Queued: len(g.queue), InFlight: len(g.inflight),
	}
	st.SnapshotIndex, _ = strconv.ParseUint(g.raft.Stats()["last_snapshot_index"], 10, 64)
	return st
}

// Close stops the replica: it stops taking commands, waits for the answers
// of those already in Raft (at most a leader lease when the leader has lost
// its majority), shuts Raft down and closes the storage. It does not hand
// leadership over (call TransferLeadership first for that): the other
// replicas elect a new leader after their heartbeat timeout. Closing twice
// is harmless.
func (g *Group[R]) Close() error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return nil
	}
	g.mu.closed = true
	g.mu.Unlock()
	// Raft leaves a command or a membership change unanswered if it shuts
	// down while the request waits in its apply channel or on its way to
	// the state machine; so first let every request handed to Raft get
	// its answer.
	close(g.stopProp)
	g.propWG.Wait()
	g.awaitWG.Wait()
	// Closing the transport first ends Raft's calls to unreachable
	// replicas at once; Raft's shutdown waits for them otherwise (up to
	// the transport timeout).
	_ = g.trans.Close()
	rerr := g.raft.Shutdown().Error()
	close(g.stopObs)
	g.obsWG.Wait()
	berr := g.behind.Close()
	werr := g.wal.Close()
	g.e.release(g.id, g)
	if err := errors.Join(rerr, berr, werr); err != nil {
		return fmt.Errorf("replication: close group %s: %w", g.id, err)
	}
	return nil
}
