package replication

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// maxBehind bounds the entries a leader's log holds written behind (queued
// or being written): past it, the leader's next append waits for the disk.
const maxBehind = 1 << 14

// errBehindClosed: the log was closed with entries it had not written.
var errBehindClosed = errors.New("replication: log closed")

// behindLog is a group's log store under Raft's cache. The library's leader
// writes and fsyncs an entry before it sends it to the followers, so a
// commit takes two disk writes in series. As leader, this store takes an
// append without waiting for the disk: a goroutine of its own writes it
// (with whatever else queued meanwhile, in one write and one fsync) while
// the followers write theirs. Raft then counts the leader in a majority
// before the leader's disk holds the entry, so two rules keep every commit
// on a majority of disks:
//   - the state machine applies an entry (and so acknowledges it) only
//     once this store made it durable (waitDurable, on the apply
//     goroutine);
//   - the commit index the leader sends its followers never exceeds its
//     durable index (clamp, in the transport), so no follower applies an
//     entry that only it and a leader's memory hold.
//
// A follower's appends, and a leader's that carry anything but commands
// (configuration changes, barriers, Raft's no-op), are written before
// StoreLogs returns, after whatever is queued: Raft acts on those the
// moment it appends them.
type behindLog struct {
	// immutable after newBehindLog
	store  raft.LogStore
	onFail func(error) // a write behind failed: the group must stop; must not block

	leading atomic.Pointer[func() bool] // whether this replica leads (Raft's state); unset: never

	mu struct {
		sync.Mutex
		queue   []*raft.Log // accepted, not yet handed to the writer, in index order
		writing []*raft.Log // being written by the writer
		durable uint64      // every stored entry up to here is on disk
		err     error       // the first failed write behind (sticky), or errBehindClosed
		closed  bool
		wake    *sync.Cond // the writer waits on it for work
		done    *sync.Cond // waiters for durability and for an empty queue
	}
	stopped chan struct{} // closed when the writer returns
}

var (
	_ raft.LogStore          = (*behindLog)(nil)
	_ raft.MonotonicLogStore = (*behindLog)(nil)
)

// IsMonotonic is the store's: raft-wal takes no gaps, so Raft empties it
// when it installs a snapshot instead of leaving a gap before what follows
// (hiding this made a follower that caught up by snapshot fail every append
// after it, and be sent the snapshot again and again).
func (l *behindLog) IsMonotonic() bool {
	m, ok := l.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func newBehindLog(store raft.LogStore, onFail func(error)) (*behindLog, error) {
	last, err := store.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("replication: read log: %w", err)
	}
	l := &behindLog{store: store, onFail: onFail, stopped: make(chan struct{})}
	l.mu.durable = last
	l.mu.wake = sync.NewCond(&l.mu)
	l.mu.done = sync.NewCond(&l.mu)
	go l.write()
	return l, nil
}

// setLeading tells the log how to know whether its replica leads (set once
// Raft exists, which needs the log first).
func (l *behindLog) setLeading(f func() bool) { l.leading.Store(&f) }

// write is the writer goroutine: it takes every queued entry, writes them
// with one StoreLogs, and repeats until Close and an empty queue.
func (l *behindLog) write() {
	defer close(l.stopped)
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for len(l.mu.queue) == 0 && !l.mu.closed {
			l.mu.wake.Wait()
		}
		if len(l.mu.queue) == 0 {
			return
		}
		batch := l.mu.queue
		l.mu.queue, l.mu.writing = nil, batch
		l.mu.Unlock()
		err := l.store.StoreLogs(batch)
		l.mu.Lock()
		l.mu.writing = nil
		if err != nil {
			// The first failure is the last write: appends fail from now on.
			err = fmt.Errorf("replication: leader's log write: %w", err)
			l.mu.err = err
			l.mu.queue = nil // never written: nothing may count them as durable
			l.mu.done.Broadcast()
			l.mu.Unlock()
			l.onFail(err)
			l.mu.Lock()
			continue
		}
		l.mu.durable = batch[len(batch)-1].Index
		l.mu.done.Broadcast()
	}
}

// StoreLogs stores logs: queued for the writer when this replica leads and
// they are all commands, else written before it returns.
func (l *behindLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if lead := l.leading.Load(); lead != nil && (*lead)() && allCommands(logs) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for l.mu.err == nil && len(l.mu.queue)+len(l.mu.writing) >= maxBehind {
			l.mu.done.Wait()
		}
		if l.mu.err != nil {
			return l.mu.err
		}
		l.mu.queue = append(l.mu.queue, logs...)
		l.mu.wake.Signal()
		return nil
	}
	if err := l.flush(); err != nil {
		return err
	}
	if err := l.store.StoreLogs(logs); err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.durable = logs[len(logs)-1].Index
	l.mu.done.Broadcast()
	l.mu.Unlock()
	return nil
}

func allCommands(logs []*raft.Log) bool {
	for _, lg := range logs {
		if lg.Type != raft.LogCommand {
			return false
		}
	}
	return true
}

// StoreLog stores one log (see StoreLogs).
func (l *behindLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// flush waits until nothing is queued or being written.
func (l *behindLog) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.mu.err == nil && (len(l.mu.queue) > 0 || len(l.mu.writing) > 0) {
		l.mu.done.Wait()
	}
	return l.mu.err
}

// waitDurable waits until every entry up to index is on disk, or a write
// behind failed.
func (l *behindLog) waitDurable(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.mu.err == nil && l.mu.durable < index {
		l.mu.done.Wait()
	}
	if l.mu.durable >= index {
		return nil
	}
	return l.mu.err
}

// durable is the index up to which every stored entry is on disk.
func (l *behindLog) durable() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.durable
}

// clamp lowers a leader's commit index to what its own disk holds.
func (l *behindLog) clamp(req *raft.AppendEntriesRequest) {
	if req.LeaderCommitIndex == 0 {
		return // a heartbeat: it carries no commit index
	}
	req.LeaderCommitIndex = min(req.LeaderCommitIndex, l.durable())
}

// GetLog reads an entry: one written behind from memory until it is on
// disk.
func (l *behindLog) GetLog(index uint64, log *raft.Log) error {
	l.mu.Lock()
	for _, pending := range [][]*raft.Log{l.mu.writing, l.mu.queue} {
		if lg := pendingLog(pending, index); lg != nil {
			*log = *lg
			l.mu.Unlock()
			return nil
		}
	}
	l.mu.Unlock()
	return l.store.GetLog(index, log)
}

// pendingLog finds index in logs (consecutive indexes), or nil.
func pendingLog(logs []*raft.Log, index uint64) *raft.Log {
	if len(logs) == 0 || index < logs[0].Index || index > logs[len(logs)-1].Index {
		return nil
	}
	return logs[index-logs[0].Index]
}

// FirstIndex is the store's, once what is queued is written.
func (l *behindLog) FirstIndex() (uint64, error) {
	if err := l.flush(); err != nil {
		return 0, err
	}
	return l.store.FirstIndex()
}

// LastIndex is the store's, once what is queued is written.
func (l *behindLog) LastIndex() (uint64, error) {
	if err := l.flush(); err != nil {
		return 0, err
	}
	return l.store.LastIndex()
}

// DeleteRange deletes entries (a compaction, or a follower's conflicting
// suffix) once what is queued is written.
func (l *behindLog) DeleteRange(lo, hi uint64) error {
	if err := l.flush(); err != nil {
		return err
	}
	if err := l.store.DeleteRange(lo, hi); err != nil {
		return err
	}
	last, err := l.store.LastIndex()
	if err != nil {
		return err
	}
	l.mu.Lock()
	// A deleted suffix: entries written at those indexes later are
	// durable only once written.
	l.mu.durable = min(l.mu.durable, last)
	l.mu.Unlock()
	return nil
}

// Close writes what is queued, stops the writer and fails later appends.
// The store itself is its owner's to close.
func (l *behindLog) Close() error {
	l.mu.Lock()
	l.mu.closed = true
	l.mu.wake.Signal()
	l.mu.Unlock()
	<-l.stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.mu.err
	if l.mu.err == nil {
		l.mu.err = errBehindClosed
	}
	l.mu.done.Broadcast()
	return err
}
