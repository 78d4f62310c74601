package replication

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// gateLog is a log store whose appends wait while its gate is shut, and
// which records the last index it stored and every batch it was given.
type gateLog struct {
	raft.LogStore
	mu struct {
		sync.Mutex
		open    bool
		changed chan struct{} // closed and replaced when open changes
		fail    error         // the next append fails with it
		last    uint64
		batches [][]uint64
	}
}

func newGateLog(store raft.LogStore) *gateLog {
	g := &gateLog{LogStore: store}
	g.mu.open = true
	g.mu.changed = make(chan struct{})
	return g
}

func (g *gateLog) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.open = open
	close(g.mu.changed)
	g.mu.changed = make(chan struct{})
}

func (g *gateLog) failNext(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.fail = err
}

func (g *gateLog) StoreLog(log *raft.Log) error { return g.StoreLogs([]*raft.Log{log}) }

func (g *gateLog) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (g *gateLog) StoreLogs(logs []*raft.Log) error {
	g.mu.Lock()
	for !g.mu.open {
		ch := g.mu.changed
		g.mu.Unlock()
		<-ch
		g.mu.Lock()
	}
	if err := g.mu.fail; err != nil {
		g.mu.fail = nil
		g.mu.Unlock()
		return err
	}
	g.mu.Unlock()
	if err := g.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	var idx []uint64
	for _, l := range logs {
		idx = append(idx, l.Index)
	}
	g.mu.Lock()
	g.mu.last = logs[len(logs)-1].Index
	g.mu.batches = append(g.mu.batches, idx)
	g.mu.Unlock()
	return nil
}

func (g *gateLog) lastStored() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.last
}

func (g *gateLog) batches() [][]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.mu.batches)
}

func commands(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "c%d", i)})
	}
	return out
}

// behindFixture is a behindLog over a gated in-memory store.
type behindFixture struct {
	gate    *gateLog
	log     *behindLog
	leading atomic.Bool
	failed  atomic.Value // error given to onFail
}

func newBehindFixture(t *testing.T) *behindFixture {
	t.Helper()
	f := &behindFixture{gate: newGateLog(raft.NewInmemStore())}
	l, err := newBehindLog(f.gate, func(err error) { f.failed.Store(err) })
	if err != nil {
		t.Fatal(err)
	}
	l.setLeading(f.leading.Load)
	f.log = l
	t.Cleanup(func() { f.gate.set(true); _ = l.Close() })
	return f
}

// heldUntilWritten runs fn with the disk stopped and checks that it waits,
// runs during (if any) while it does, then lets the disk write and checks
// that fn returns without error.
func (f *behindFixture) heldUntilWritten(t *testing.T, what string, fn func() error, during func()) {
	t.Helper()
	ch := start(fn)
	if _, ok := returned(ch); ok {
		t.Fatalf("%s returned before the disk wrote it", what)
	}
	if during != nil {
		during()
	}
	f.gate.set(true)
	if err, ok := returned(ch); !ok || err != nil {
		t.Fatalf("%s after the write: returned %v, err %v", what, ok, err)
	}
}

// start runs fn on a goroutine; returned reports, once every goroutine of
// the bubble is blocked, whether it returned, and its error.
func start(fn func() error) chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

func returned(ch chan error) (error, bool) {
	synctest.Wait()
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

// TestBehindLogLeaderAppendDoesNotWaitForTheDisk: a leader's append of
// commands returns while the disk has not written it, reads of it are
// served from memory, and waiting for its durability ends only once the
// disk wrote it.
func TestBehindLogLeaderAppendDoesNotWaitForTheDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newBehindFixture(t)
		f.leading.Store(true)
		f.gate.set(false)
		if err, ok := returned(start(func() error { return f.log.StoreLogs(commands(1, 3)) })); !ok || err != nil {
			t.Fatalf("leader's append: returned %v, err %v; want it to return at once", ok, err)
		}
		var got raft.Log
		if err := f.log.GetLog(2, &got); err != nil || string(got.Data) != "c2" {
			t.Fatalf("GetLog(2) of an entry being written: %q, %v", got.Data, err)
		}
		f.heldUntilWritten(t, "waitDurable(3)", func() error { return f.log.waitDurable(3) }, func() {
			if d := f.log.durable(); d != 0 {
				t.Fatalf("durable %d before any write finished, want 0", d)
			}
		})
		if f.gate.lastStored() != 3 || f.log.durable() != 3 {
			t.Fatalf("stored %d, durable %d; want 3 and 3", f.gate.lastStored(), f.log.durable())
		}
	})
}

// TestBehindLogWritesBeforeReturning: a follower's append, and a leader's
// append of anything but commands, is on disk when StoreLogs returns, and
// after whatever the leader queued before it, in index order.
func TestBehindLogWritesBeforeReturning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newBehindFixture(t)
		f.leading.Store(true)
		f.gate.set(false)
		if err := f.log.StoreLogs(commands(1, 2)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the writer took 1..2 and waits for the disk
		if err := f.log.StoreLogs(commands(3, 4)); err != nil {
			t.Fatal(err)
		}
		if err := f.log.StoreLogs(commands(5, 6)); err != nil {
			t.Fatal(err)
		}
		conf := []*raft.Log{{Index: 7, Term: 1, Type: raft.LogConfiguration}}
		f.heldUntilWritten(t, "a leader's configuration append", func() error { return f.log.StoreLogs(conf) }, nil)
		if f.log.durable() != 7 {
			t.Fatalf("durable %d after a written append up to 7", f.log.durable())
		}
		// As follower: written before it returns.
		f.leading.Store(false)
		f.gate.set(false)
		f.heldUntilWritten(t, "a follower's append", func() error { return f.log.StoreLogs(commands(8, 8)) }, nil)
		var order []uint64
		for _, b := range f.gate.batches() {
			order = append(order, b...)
		}
		if !slices.Equal(order, []uint64{1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Fatalf("the disk got %v, want 1..8 in order", order)
		}
		// The two appends queued behind the first write went to the
		// disk as one write.
		if b := f.gate.batches(); len(b) != 4 || !slices.Equal(b[1], []uint64{3, 4, 5, 6}) {
			t.Fatalf("writes %v, want [1 2] [3 4 5 6] [7] [8]", b)
		}
	})
}

// TestBehindLogFailedWrite: a failed write behind fails every wait for
// what it held and every later append, and reports the failure once.
func TestBehindLogFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newBehindFixture(t)
		f.leading.Store(true)
		disk := errors.New("disk on fire")
		f.gate.failNext(disk)
		f.gate.set(false)
		if err := f.log.StoreLogs(commands(1, 2)); err != nil {
			t.Fatal(err)
		}
		wait := start(func() error { return f.log.waitDurable(2) })
		f.gate.set(true)
		err, ok := returned(wait)
		if !ok || !errors.Is(err, disk) {
			t.Fatalf("waitDurable after a failed write: returned %v, err %v; want the disk's error", ok, err)
		}
		if got, _ := f.failed.Load().(error); !errors.Is(got, disk) {
			t.Fatalf("onFail got %v, want the disk's error", got)
		}
		if err := f.log.StoreLogs(commands(3, 3)); !errors.Is(err, disk) {
			t.Fatalf("append after a failed write: %v, want the disk's error", err)
		}
		if f.log.durable() != 0 {
			t.Fatalf("durable %d after the only write failed", f.log.durable())
		}
	})
}

// TestBehindLogClampAndTruncate: the commit index sent to followers never
// passes the durable index (heartbeats, which carry none, stay as they
// are), and deleting a suffix takes it back.
func TestBehindLogClampAndTruncate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newBehindFixture(t)
		f.leading.Store(true)
		if err := f.log.StoreLogs(commands(1, 4)); err != nil {
			t.Fatal(err)
		}
		if err := f.log.waitDurable(4); err != nil {
			t.Fatal(err)
		}
		f.gate.set(false)
		if err := f.log.StoreLogs(commands(5, 6)); err != nil {
			t.Fatal(err)
		}
		req := &raft.AppendEntriesRequest{LeaderCommitIndex: 6}
		f.log.clamp(req)
		if req.LeaderCommitIndex != 4 {
			t.Fatalf("commit index sent %d, want the durable 4", req.LeaderCommitIndex)
		}
		hb := &raft.AppendEntriesRequest{}
		f.log.clamp(hb)
		if hb.LeaderCommitIndex != 0 {
			t.Fatalf("heartbeat's commit index became %d", hb.LeaderCommitIndex)
		}
		f.gate.set(true)
		// A follower's log losing its suffix 3..6 (a new leader's log
		// conflicts): waits for the queue, then lowers durable.
		f.leading.Store(false)
		if err := f.log.DeleteRange(3, 6); err != nil {
			t.Fatal(err)
		}
		if d := f.log.durable(); d != 2 {
			t.Fatalf("durable %d after deleting 3..6, want 2", d)
		}
		last, err := f.log.LastIndex()
		if err != nil || last != 2 {
			t.Fatalf("LastIndex %d, %v; want 2", last, err)
		}
	})
}

// TestBehindLogCloseWritesQueued: Close writes what the leader queued.
func TestBehindLogCloseWritesQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newBehindFixture(t)
		f.leading.Store(true)
		f.gate.set(false)
		if err := f.log.StoreLogs(commands(1, 3)); err != nil {
			t.Fatal(err)
		}
		f.heldUntilWritten(t, "Close with entries queued", f.log.Close, nil)
		if f.gate.lastStored() != 3 {
			t.Fatalf("stored up to %d, want 3", f.gate.lastStored())
		}
		if err := f.log.StoreLogs(commands(4, 4)); !errors.Is(err, errBehindClosed) {
			t.Fatalf("append after Close: %v", err)
		}
	})
}

// TestLeaderWriteBehindCommitsOnAMajorityOfDisks runs a group whose
// leader's disk stops writing: both followers store a new command, yet it
// is neither acknowledged nor applied anywhere (the leader's apply waits
// for its own disk, the followers are sent a commit index no higher than
// the leader's disk holds) until the leader's disk writes it; then every
// replica applies it and the proposal succeeds.
func TestLeaderWriteBehindCommitsOnAMajorityOfDisks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		gates := map[string]*gateLog{}
		for _, id := range ids(3) {
			c.engine(id).wrapLog = func(_ GroupID, s raft.LogStore) raft.LogStore {
				g := newGateLog(s)
				gates[id] = g
				return g
			}
		}
		c.start(ids(3)...)
		// Before the cluster's cleanup: a group closes only once its
		// leader's disk wrote what it queued.
		t.Cleanup(func() {
			for _, g := range gates {
				g.set(true)
			}
		})
		leadID, lead := c.leader()
		ctx := ctxFor(t, time.Minute)
		if _, err := lead.Propose(ctx, []byte("first")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "every replica applies the first command", func() bool {
			for _, id := range ids(3) {
				if len(c.fsms[id].cmds()) != 1 {
					return false
				}
			}
			return true
		})
		gates[leadID].set(false)
		p, err := lead.Submit(ctx, []byte("second"))
		if err != nil {
			t.Fatal(err)
		}
		want := gates[leadID].lastStored() + 1
		waitFor(t, 10*time.Second, "both followers store the second command", func() bool {
			for _, id := range ids(3) {
				if id != leadID && gates[id].lastStored() < want {
					return false
				}
			}
			return true
		})
		// Long enough for the leader to send its commit index several
		// times (it does every Commit timeout).
		time.Sleep(2 * time.Second) // lint:sleep-ok fake time in a synctest bubble: the leader sends its commit index meanwhile
		synctest.Wait()
		select {
		case <-p.Done():
			t.Fatal("the second command was acknowledged while only the followers' disks held it")
		default:
		}
		for _, id := range ids(3) {
			if got := c.fsms[id].cmds(); len(got) != 1 {
				t.Fatalf("%s (leader %s) applied %v while the leader's disk did not hold the second command", id, leadID, got)
			}
		}
		gates[leadID].set(true)
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("second command after the leader's disk wrote it: %v", err)
		}
		waitFor(t, 10*time.Second, "every replica applies the second command", func() bool {
			for _, id := range ids(3) {
				if len(c.fsms[id].cmds()) != 2 {
					return false
				}
			}
			return true
		})
	})
}

// TestBehindLogIsMonotonicOverTheWAL: Raft empties a monotonic store when
// it installs a snapshot, which raft-wal needs (it takes no gaps); the
// write-behind store must not hide that.
func TestBehindLogIsMonotonicOverTheWAL(t *testing.T) {
	w, err := wal.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := newBehindLog(timedLog{WAL: w}, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cache, err := raft.NewLogCache(8, l)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.IsMonotonic() {
		t.Fatal("Raft sees a non-monotonic store over raft-wal")
	}
}
