package replication

import (
	"context"
	"fmt"
	"sync"

	"github.com/sextantmq/sextant/internal/clock"
)

// SingleConfig configures a Single.
type SingleConfig struct {
	// NodeID and Addr name this node as the group's leader.
	NodeID string
	Addr   string
	// MaxBatch is the most commands applied in one state machine batch
	// (default 256).
	MaxBatch int
	// QueueDepth bounds the commands waiting to be applied (default 1024);
	// Submit waits (until its context ends) while it is full.
	QueueDepth int
	// Clock stamps entries (default: the wall clock).
	Clock clock.Clock
}

// Single is a group with one replica (replicas 1): no Raft, no log of its
// own. Commands are applied in submission order by one goroutine, which
// takes every command waiting when it starts a batch (up to MaxBatch) and
// applies them in one FSM batch, so concurrent proposals share the state
// machine's write and fsync. Indexes continue from fsm.Applied()+1, one per
// command, in term 1 (after a restart, the index of a trailing command that
// left no trace in the state is given again). The state machine is the durable record: it must
// make a batch durable before Apply returns, since nothing replays it.
type Single[R any] struct {
	// immutable after NewSingle
	id       GroupID
	cfg      SingleConfig
	fsm      FSM[R]
	queue    chan *Pending[R]
	leaderCh chan Leader
	stop     chan struct{}

	wg      sync.WaitGroup // the applier
	senders sync.WaitGroup // Submit calls between their closed check and their enqueue

	mu struct {
		sync.Mutex
		closed  bool
		failure error
		applied uint64
	}
}

// NewSingle starts a single-replica group over fsm.
func NewSingle[R any](id GroupID, fsm FSM[R], cfg SingleConfig) (*Single[R], error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if err := validNodeID(cfg.NodeID); err != nil {
		return nil, err
	}
	if fsm == nil {
		return nil, fmt.Errorf("%w: group %s: nil state machine", ErrConfig, id)
	}
	if cfg.MaxBatch < 0 || cfg.MaxBatch > maxMaxBatch || cfg.QueueDepth < 0 {
		return nil, fmt.Errorf("%w: group %s: batch %d or queue depth %d out of range", ErrConfig, id, cfg.MaxBatch, cfg.QueueDepth)
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	if cfg.QueueDepth == 0 {
		cfg.QueueDepth = defaultQueueDepth
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	s := &Single[R]{
		id: id, cfg: cfg, fsm: fsm,
		queue:    make(chan *Pending[R], cfg.QueueDepth),
		leaderCh: make(chan Leader, 1),
		stop:     make(chan struct{}),
	}
	s.mu.applied = fsm.Applied()
	s.leaderCh <- s.Leader()
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// Submit queues cmd; see Replica.
func (s *Single[R]) Submit(ctx context.Context, cmd []byte) (*Pending[R], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.mu.closed || s.mu.failure != nil {
		err := s.closedLocked()
		s.mu.Unlock()
		return nil, err
	}
	s.senders.Add(1)
	s.mu.Unlock()
	defer s.senders.Done()
	p := newPending[R](cmd, s.cfg.Clock.Now())
	select {
	case s.queue <- p:
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.stop:
		return nil, s.closedErr()
	}
}

// Propose applies cmd and returns the state machine's result.
func (s *Single[R]) Propose(ctx context.Context, cmd []byte) (R, error) {
	p, err := s.Submit(ctx, cmd)
	if err != nil {
		var zero R
		return zero, err
	}
	return p.Wait(ctx)
}

// run applies queued commands in batches until Close.
func (s *Single[R]) run() {
	defer s.wg.Done()
	batch := make([]*Pending[R], 0, s.cfg.MaxBatch)
	entries := make([]Entry, 0, s.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case p := <-s.queue:
			batch = append(batch, p)
		case <-s.stop:
			s.senders.Wait()
			s.drain()
			return
		}
	more:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case p := <-s.queue:
				batch = append(batch, p)
			default:
				break more
			}
		}
		s.apply(batch, entries[:0])
	}
}

func (s *Single[R]) apply(batch []*Pending[R], entries []Entry) {
	var zero R
	if err := s.err(); err != nil {
		for _, p := range batch {
			p.resolve(zero, err)
		}
		return
	}
	s.mu.Lock()
	next := s.mu.applied + 1
	s.mu.Unlock()
	now := s.cfg.Clock.Now()
	for i, p := range batch {
		entries = append(entries, Entry{Index: next + uint64(i), Term: 1, Time: now, Cmd: p.cmd})
	}
	last := entries[len(entries)-1].Index
	res, err := s.fsm.Apply(entries)
	if err == nil && len(res) != len(entries) {
		err = fmt.Errorf("state machine returned %d results for %d entries", len(res), len(entries))
	}
	if err == nil {
		if got := s.fsm.Applied(); got > last {
			err = fmt.Errorf("state machine reports applied index %d after applying up to %d", got, last)
		}
	}
	if err != nil {
		s.mu.Lock()
		s.mu.failure = err
		s.mu.Unlock()
		ferr := fmt.Errorf("%w: %w: group %s: %w", ErrFailed, ErrUnknownOutcome, s.id, err)
		for _, p := range batch {
			p.resolve(zero, ferr)
		}
		return
	}
	s.mu.Lock()
	s.mu.applied = last
	s.mu.Unlock()
	for i, p := range batch {
		p.resolve(res[i], nil)
	}
	clear(entries)
}

// drain answers the commands still queued at Close.
func (s *Single[R]) drain() {
	err := s.closedErr()
	var zero R
	for {
		select {
		case p := <-s.queue:
			p.resolve(zero, err)
		default:
			return
		}
	}
}

// err is the failure that stopped the group, if any.
func (s *Single[R]) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.failure != nil {
		return stoppedErr(s.id, s.mu.failure)
	}
	return nil
}

func (s *Single[R]) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closedLocked()
}

func (s *Single[R]) closedLocked() error { return stoppedErr(s.id, s.mu.failure) }

// Leader is always this node.
func (s *Single[R]) Leader() Leader {
	return Leader{ID: s.cfg.NodeID, Addr: s.cfg.Addr, Term: 1, Local: true}
}

// IsLeader is always true.
func (s *Single[R]) IsLeader() bool { return true }

// Leadership holds this node as the leader from the start; nothing
// changes afterwards.
func (s *Single[R]) Leadership() <-chan Leader { return s.leaderCh }

// Stats returns the group's figures.
func (s *Single[R]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	role := RoleLeader
	if s.mu.closed || s.mu.failure != nil {
		role = RoleShutdown
	}
	return Stats{
		Group: s.id, Role: role, Leader: s.Leader(), Term: 1,
		LastIndex: s.mu.applied, CommitIndex: s.mu.applied, Applied: s.mu.applied,
		Members: []Member{{ID: s.cfg.NodeID, Addr: s.cfg.Addr, Voter: true}},
		Queued:  len(s.queue),
	}
}

// Close stops the group; commands still queued get ErrClosed.
func (s *Single[R]) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	return nil
}
