package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/sextantmq/sextant/internal/logging"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/run"
)

// logStore is the group's log and stable store.
type logStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// Retry pauses, doubling from the minimum to the maximum: Join asking the
// group to add this node, and a request waiting for a leader it can reach.
const (
	joinBackoffMin   = 20 * time.Millisecond
	joinBackoffMax   = time.Second
	leaderBackoffMin = 10 * time.Millisecond
	leaderBackoffMax = 500 * time.Millisecond
)

// rpcTimeout bounds one Raft RPC on the group's connections (the
// transport's I/O deadline).
const rpcTimeout = 10 * time.Second

// walSegmentSize is the size of one segment file of the log (preallocated).
const walSegmentSize = 8 << 20

// openStorage opens the log, stable store and snapshots in cfg.DataDir, or
// in memory with cfg.InMemory.
func openStorage(cfg Config, rep *logging.Repeats) (logStore, raft.SnapshotStore, error) {
	if cfg.InMemory {
		return inmemLog{raft.NewInmemStore()}, raft.NewInmemSnapshotStore(), nil
	}
	walDir := filepath.Join(cfg.DataDir, "wal")
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("meta: data dir: %w", err)
	}
	log, err := wal.Open(walDir, wal.WithLogger(logging.Hclog(cfg.Logger, "wal", rep)), wal.WithSegmentSize(walSegmentSize))
	if err != nil {
		return nil, nil, fmt.Errorf("meta: open log: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, logging.Hclog(cfg.Logger, "snapshots", rep))
	if err != nil {
		_ = log.Close()
		return nil, nil, fmt.Errorf("meta: open snapshots: %w", err)
	}
	return log, snaps, nil
}

// inmemLog is Raft's in-memory store with the Close the WAL has.
type inmemLog struct{ *raft.InmemStore }

func (inmemLog) Close() error { return nil }

// Errors of the metadata group.
var (
	// ErrClosed: the Meta was closed.
	ErrClosed = errors.New("meta: closed")
	// ErrNotLeader: this node cannot execute the request because it does
	// not lead (internal; callers of Propose see retries instead).
	ErrNotLeader = errors.New("meta: not the leader")
	// ErrUnknownOutcome: the request may or may not have been applied (the
	// leader lost leadership, the connection broke, or ctx ended after the
	// request was sent). Read the state to find out.
	ErrUnknownOutcome = errors.New("meta: outcome unknown")
)

// Meta is this node's member of the metadata group.
type Meta struct {
	// immutable after Open
	cfg     Config
	logger  *slog.Logger
	raft    *raft.Raft
	log     logStore
	layer   *raftLayer
	machine *machine
	group   *run.Group    // every goroutine Meta starts; its context ends at Close and bounds served requests
	fwd     forwardPool   // idle forward connections to the leader
	ready   chan struct{} // closed once the copy caught up (catchup.go)
	// oldLeader (tests): answer read_index as a node of an earlier
	// version does, an unknown op.
	oldLeader atomic.Bool
}

// Open opens (or creates) the node's group storage in cfg.DataDir, starts
// Raft and serves cfg.Listener. See Config.Bootstrap for how a new group
// starts. ctx only bounds Open itself.
func Open(ctx context.Context, cfg Config) (m *Meta, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for _, c := range slices.Backward(closers) {
				_ = c()
			}
		}
	}()
	closers = append(closers, cfg.Listener.Close)

	// Raft's parts share one limit on repeated records (logging.Hclog).
	rep := logging.NewRepeats(nil, 0, 0)
	log, snaps, err := openStorage(cfg, rep)
	if err != nil {
		return nil, err
	}
	closers = append(closers, log.Close)

	layer := newRaftLayer(cfg.Addr, cfg.Dial, cfg.TLS)
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 3,
		Timeout: rpcTimeout,
		// No pipelined replication: in the Raft library's pipeline, a
		// follower's failed append (Success=false) ends the decoder while
		// the sender may be parked on a full in-progress channel that only
		// it would close, so the leader stops sending that follower
		// entries (heartbeats go on, so no election heals it) and its
		// Shutdown waits forever (hashicorp/raft#612). Found by
		// clustertest.TestSequencedChecker; batching keeps throughput.
		MaxRPCsInFlight: 1,
		Logger:          logging.Hclog(cfg.Logger, "raft-net", rep),
	})
	closers = append(closers, trans.Close)

	rc := cfg.raftConfig()
	rc.Logger = logging.Hclog(cfg.Logger, "raft", rep)
	if cfg.bootstraps() {
		has, err := raft.HasExistingState(log, log, snaps)
		if err != nil {
			return nil, fmt.Errorf("meta: inspect storage: %w", err)
		}
		if !has {
			var servers []raft.Server
			for _, s := range cfg.Bootstrap {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Addr)})
			}
			if err := raft.BootstrapCluster(rc, log, log, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
				return nil, fmt.Errorf("meta: bootstrap: %w", err)
			}
		}
	}
	mach := newMachine()
	r, err := raft.NewRaft(rc, mach, log, log, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("meta: start raft: %w", err)
	}
	m = &Meta{cfg: cfg, logger: logger, raft: r, log: log, layer: layer, machine: mach, ready: make(chan struct{})}
	m.group = run.NewGroup(context.Background())
	m.group.Go(m.acceptLoop)
	m.group.Go(m.watchLeader)
	m.group.Go(m.catchUp)
	return m, nil
}

// Close stops serving, shuts Raft down and closes the storage. It waits for
// every goroutine Meta started.
func (m *Meta) Close() error {
	if !m.group.Stop() {
		return nil
	}
	_ = m.cfg.Listener.Close()
	m.fwd.reset(true)
	rerr := m.raft.Shutdown().Error() // also closes the transport and its connections
	m.group.Wait()
	werr := m.log.Close()
	if err := errors.Join(rerr, werr); err != nil {
		return fmt.Errorf("meta: close: %w", err)
	}
	return nil
}

// ID returns this node's id.
func (m *Meta) ID() string { return m.cfg.NodeID }

// State returns this node's copy of the metadata. It is local and may lag
// the leader; see Wait, CaughtUp and ReadBarrier.
func (m *Meta) State() fsm.State { return m.machine.current() }

// Changed returns a channel that is closed when the state next changes.
func (m *Meta) Changed() <-chan struct{} { return m.machine.changed() }

// Wait blocks until the command at log index (a Result.Index) is applied to
// this node's copy, or ctx ends.
func (m *Meta) Wait(ctx context.Context, index uint64) error {
	for {
		ch := m.machine.changed()
		if m.machine.current().Applied() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("meta: wait for index %d: %w", index, ctx.Err())
		}
	}
}

// Leader returns the current leader's id and address as this node knows
// them; both are empty when no leader is known.
func (m *Meta) Leader() (id, addr string) {
	a, i := m.raft.LeaderWithID()
	return string(i), string(a)
}

// LastContact returns when this node last heard from the group's leader
// (the zero time if never since it started). On the leader it is the
// current time: it is its own contact.
func (m *Meta) LastContact(now time.Time) time.Time {
	if m.IsLeader() {
		return now
	}
	return m.raft.LastContact()
}

// IsLeader reports whether this node currently leads the group.
func (m *Meta) IsLeader() bool { return m.raft.State() == raft.Leader }

// Servers returns the group's members from this node's latest
// configuration, sorted by id.
func (m *Meta) Servers(ctx context.Context) ([]Server, error) {
	f := m.raft.GetConfiguration()
	if err := m.await(ctx, f); err != nil {
		return nil, mapRaftErr(err)
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Voters returns the voting members.
func (m *Meta) Voters(ctx context.Context) ([]Server, error) {
	all, err := m.Servers(ctx)
	return slices.DeleteFunc(all, func(s Server) bool { return !s.Voter }), err
}

// Propose commits cmd through the leader (forwarding it when this node
// does not lead) and returns its result. A command rejected by the state
// machine returns its Result and the *fsm.Error (errors.Is ErrInvalid,
// ErrConflict or ErrNotFound). An invalid command is rejected here without
// a round trip. ErrUnknownOutcome means the command may have been applied.
func (m *Meta) Propose(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	b, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	resp, err := m.leaderDo(ctx, request{Op: opPropose, Cmd: b}, false)
	if err != nil {
		return fsm.Result{}, err
	}
	if resp.Result == nil {
		return fsm.Result{}, fmt.Errorf("meta: propose: leader sent no result")
	}
	return *resp.Result, resp.Result.Err()
}

// AddVoter adds (or promotes) a voting member.
func (m *Meta) AddVoter(ctx context.Context, id, addr string) error {
	_, err := m.leaderDo(ctx, request{Op: opAddVoter, ID: id, Addr: addr}, true)
	return err
}

// AddNonvoter adds a member that replicates the log without voting.
func (m *Meta) AddNonvoter(ctx context.Context, id, addr string) error {
	_, err := m.leaderDo(ctx, request{Op: opAddNonvoter, ID: id, Addr: addr}, true)
	return err
}

// RemoveServer removes a member from the group.
func (m *Meta) RemoveServer(ctx context.Context, id string) error {
	_, err := m.leaderDo(ctx, request{Op: opRemoveServer, ID: id}, true)
	return err
}

// Snapshot makes this node take a snapshot now (Raft also takes them every
// SnapshotThreshold entries).
func (m *Meta) Snapshot(ctx context.Context) error {
	if err := m.await(ctx, m.raft.Snapshot()); err != nil {
		return fmt.Errorf("meta: snapshot: %w", mapRaftErr(err))
	}
	return nil
}

// Join asks the group, through any of addrs (members' group addresses), to
// add this node as a voter (Config.Voter) or non-voter. It follows leader
// hints and retries with backoff until the leader accepted or ctx ends.
func (m *Meta) Join(ctx context.Context, addrs []string) error {
	req := request{Op: opAddNonvoter, ID: m.cfg.NodeID, Addr: m.cfg.Addr}
	if m.cfg.Voter {
		req.Op = opAddVoter
	}
	var last error
	backoff := joinBackoffMin
	for {
		for _, a := range addrs {
			target := a
			for hop := 0; hop < 3; hop++ {
				resp, err := m.forwardOn(ctx, target, req, false)
				if err != nil {
					last = err
					break
				}
				if resp.Code == "" {
					return nil
				}
				last = resp.err()
				if resp.Code != codeNotLeader || resp.Leader == "" || resp.Leader == target {
					break
				}
				target = resp.Leader
			}
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return fmt.Errorf("meta: join via %v: %w (last error: %w)", addrs, err, last)
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// leaderDo executes req on the leader: locally if this node leads, else
// forwarded. Requests that were not executed (no leader yet, a stale
// leader, a failed dial) are retried with backoff until ctx ends; so are
// idempotent requests with an unknown outcome.
func (m *Meta) leaderDo(ctx context.Context, req request, idempotent bool) (response, error) {
	backoff := leaderBackoffMin
	for {
		if m.group.Stopped() {
			return response{}, ErrClosed
		}
		var (
			resp response
			err  error
			sent bool
		)
		if m.IsLeader() {
			resp, sent = m.execute(ctx, req), true
		} else if _, addr := m.Leader(); addr != "" && addr != m.cfg.Addr {
			resp, err = m.forward(ctx, addr, req)
			sent = err == nil
			if errors.Is(err, ErrUnknownOutcome) && (!idempotent || ctx.Err() != nil) {
				return response{}, err
			}
		}
		if sent && resp.Code != codeNotLeader && !(idempotent && resp.Code == codeUnknownOutcome) {
			return resp, resp.err()
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return response{}, fmt.Errorf("meta: no leader reachable: %w", err)
		}
		backoff = min(2*backoff, leaderBackoffMax)
	}
}

func (r response) err() error {
	switch r.Code {
	case "":
		return nil
	case codeNotLeader:
		return fmt.Errorf("%w (leader %q)", ErrNotLeader, r.Leader)
	case codeUnknownOutcome:
		return fmt.Errorf("%w: %s", ErrUnknownOutcome, r.Error)
	}
	return fmt.Errorf("meta: leader failed the request: %s", r.Error)
}

// applyLocal applies an encoded command on this node, the leader.
func (m *Meta) applyLocal(ctx context.Context, cmd []byte) (fsm.Result, error) {
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fsm.Result{}, err
	}
	f := m.raft.Apply(cmd, timeout)
	if err := m.await(ctx, f); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return fsm.Result{}, fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		}
		return fsm.Result{}, mapRaftErr(err)
	}
	res, ok := f.Response().(fsm.Result)
	if !ok {
		return fsm.Result{}, fmt.Errorf("meta: apply returned %T", f.Response())
	}
	return res, nil
}

// changeLocal changes the group's membership on this node, the leader.
func (m *Meta) changeLocal(ctx context.Context, op, id, addr string) error {
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return err
	}
	var f raft.IndexFuture
	switch op {
	case opAddVoter:
		f = m.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	case opAddNonvoter:
		f = m.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	default:
		f = m.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	}
	if err := m.await(ctx, f); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return fmt.Errorf("meta: %s %s: %w: %w", op, id, ErrUnknownOutcome, err)
		}
		return fmt.Errorf("meta: %s %s: %w", op, id, mapRaftErr(err))
	}
	return nil
}

// await waits for a Raft future or ctx. Raft resolves every future, at the
// latest when it shuts down, so the waiting goroutine always ends.
func (m *Meta) await(ctx context.Context, f raft.Future) error {
	if m.group.Stopped() {
		return ErrClosed
	}
	done := make(chan error, 1)
	// Not one of m.group's goroutines, which Close waits for: Raft never
	// answers a future still queued in its apply channel when it shuts
	// down (its run loop answers them, and it has exited), so a barrier
	// or apply issued just before Close would hold Close forever. Such a
	// waiter ends with the process; it holds nothing but the future.
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-m.group.Context().Done():
		return ErrClosed
	}
}

// mapRaftErr classifies Raft's errors into this package's.
func mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// timeoutOf converts ctx's deadline into Raft's enqueue timeout (0: none).
func timeoutOf(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	return max(time.Until(d), time.Millisecond), nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
