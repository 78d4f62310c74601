package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/message"
)

func openStore(t *testing.T, path string, o Options) *Store {
	t.Helper()
	s, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func commit(t *testing.T, s *Store, fill func(*Batch)) {
	t.Helper()
	var b Batch
	fill(&b)
	if err := s.CommitWait(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
}

// contents is everything a store holds, for comparisons.
type contents struct {
	sessions []*SessionRecord
	messages map[string][]*QueuedMessage
	inbound  map[string][]uint16
	retained []*message.Message
}

func load(t *testing.T, s *Store, clients ...string) contents {
	t.Helper()
	c := contents{messages: map[string][]*QueuedMessage{}, inbound: map[string][]uint16{}}
	if err := s.LoadSessions(func(r *SessionRecord) error { c.sessions = append(c.sessions, r); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, id := range clients {
		if err := s.LoadMessages(id, func(q *QueuedMessage) error { c.messages[id] = append(c.messages[id], q); return nil }); err != nil {
			t.Fatal(err)
		}
		ids, err := s.LoadInbound(id)
		if err != nil {
			t.Fatal(err)
		}
		if ids != nil {
			c.inbound[id] = ids
		}
	}
	if err := s.LoadRetained(func(m *message.Message) error { c.retained = append(c.retained, m); return nil }); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEveryRecordSurvivesCloseAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, Options{})
	sess := sampleSession()
	other := &SessionRecord{ClientID: "b", Version: 4, ExpiryInterval: 60}
	q1, q2 := sampleQueued(), &QueuedMessage{Seq: 9, Msg: sampleMessage("x", "y")}
	ret := sampleMessage("r/1", "kept")
	commit(t, s, func(b *Batch) {
		b.PutSession(sess)
		b.PutSession(other)
		b.PutMessage(sess.ClientID, q2) // out of order on purpose: loads are in Seq order
		b.PutMessage(sess.ClientID, q1)
		b.PutInbound(sess.ClientID, 300)
		b.PutInbound(sess.ClientID, 2)
		b.PutRetained(ret)
	})
	check := func(s *Store) {
		t.Helper()
		c := load(t, s, sess.ClientID, "b")
		if len(c.sessions) != 2 || !sameSession(c.sessions[0], other) || !sameSession(c.sessions[1], sess) {
			t.Fatalf("sessions %+v", c.sessions)
		}
		if m := c.messages[sess.ClientID]; len(m) != 2 || !sameQueued(m[0], q1) || !sameQueued(m[1], q2) {
			t.Fatalf("messages %+v", m)
		}
		if len(c.messages["b"]) != 0 || c.inbound["b"] != nil {
			t.Fatalf("client b has %v %v", c.messages["b"], c.inbound["b"])
		}
		if !slices.Equal(c.inbound[sess.ClientID], []uint16{2, 300}) {
			t.Fatalf("inbound %v", c.inbound)
		}
		if len(c.retained) != 1 || !sameMessage(c.retained[0], ret) {
			t.Fatalf("retained %+v", c.retained)
		}
		if n, err := s.NextSeq(sess.ClientID); err != nil || n != 10 {
			t.Fatalf("NextSeq %d %v, want 10", n, err)
		}
		if n, err := s.NextSeq("b"); err != nil || n != 1 {
			t.Fatalf("NextSeq of a client without messages %d %v, want 1", n, err)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, mode := range []FsyncMode{FsyncAlways, FsyncBatch, FsyncNever} {
		s = openStore(t, path, Options{Fsync: mode})
		check(s)
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBatchAppliesOpsInOrder(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{})
	m := func(seq uint64) *QueuedMessage { return &QueuedMessage{Seq: seq, Msg: &message.Message{Topic: "t"}} }
	commit(t, s, func(b *Batch) {
		b.PutSession(&SessionRecord{ClientID: "gone", Version: 5})
		b.PutMessage("gone", m(1))
		b.PutInbound("gone", 1)
		b.PutSession(&SessionRecord{ClientID: "kept", Version: 5})
		b.PutMessage("kept", m(1))
		b.PutMessage("kept", m(2))
		b.PutInbound("kept", 5)
		b.PutRetained(&message.Message{Topic: "r1"})
		b.PutRetained(&message.Message{Topic: "r2"})
	})
	commit(t, s, func(b *Batch) {
		b.DeleteSession("gone")      // takes its messages and inbound ids along
		b.PutMessage("kept", m(3))   // put then delete: deleted
		b.DeleteMessage("kept", 3)   //
		b.DeleteMessage("kept", 1)   // delete then put: present
		b.PutMessage("kept", m(1))   //
		b.DeleteMessage("kept", 2)   //
		b.DeleteMessage("nobody", 1) // deleting what does not exist is fine
		b.DeleteInbound("kept", 5)   //
		b.PutInbound("kept", 6)      //
		b.DeleteInbound("nobody", 6) //
		b.PutRetained(&message.Message{Topic: "r3"})
		b.DeleteRetained("r3")
		b.DeleteRetained("r1")
		b.DeleteSession("never-existed")
	})
	c := load(t, s, "gone", "kept")
	if len(c.sessions) != 1 || c.sessions[0].ClientID != "kept" {
		t.Fatalf("sessions %+v", c.sessions)
	}
	if len(c.messages["gone"]) != 0 || c.inbound["gone"] != nil {
		t.Fatalf("deleted session left %v %v", c.messages["gone"], c.inbound["gone"])
	}
	if got := c.messages["kept"]; len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("kept messages %+v", got)
	}
	if !slices.Equal(c.inbound["kept"], []uint16{6}) {
		t.Fatalf("kept inbound %v", c.inbound["kept"])
	}
	if len(c.retained) != 1 || c.retained[0].Topic != "r2" {
		t.Fatalf("retained %+v", c.retained)
	}
	// A session deleted and recreated in one batch starts empty.
	commit(t, s, func(b *Batch) {
		b.DeleteSession("kept")
		b.PutSession(&SessionRecord{ClientID: "kept", Version: 4})
		b.PutMessage("kept", m(7))
	})
	c = load(t, s, "kept")
	if len(c.sessions) != 1 || c.sessions[0].Version != 4 || len(c.messages["kept"]) != 1 || c.messages["kept"][0].Seq != 7 || c.inbound["kept"] != nil {
		t.Fatalf("recreated session: %+v %+v %v", c.sessions, c.messages["kept"], c.inbound["kept"])
	}
}

// recorder is an Observer that keeps what it saw.
type recorder struct {
	mu      sync.Mutex
	commits []CommitInfo
	syncs   int
}

var _ Observer = (*recorder)(nil)

func (r *recorder) ObserveCommit(c CommitInfo) {
	r.mu.Lock()
	r.commits = append(r.commits, c)
	r.mu.Unlock()
}
func (r *recorder) ObserveSync(time.Duration) { r.mu.Lock(); r.syncs++; r.mu.Unlock() }

func (r *recorder) batchSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n []int
	for _, c := range r.commits {
		n = append(n, c.Batches)
	}
	return n
}

// holdWriter commits a batch whose done blocks the writer goroutine until the
// returned release is called, so that the test can queue batches behind it.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	var b Batch
	b.PutRetained(&message.Message{Topic: "hold"})
	if err := s.Commit(context.Background(), &b, func(error) { close(entered); <-gate }); err != nil {
		t.Fatal(err)
	}
	<-entered
	return func() { close(gate) }
}

func TestQueuedBatchesShareATransactionAndCompleteInOrder(t *testing.T) {
	rec := &recorder{}
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{Observer: rec, MaxBatchOps: 8})
	release := holdWriter(t, s)

	// 20 batches of one op, and one of 10 ops that is never split.
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := 1; i <= 21; i++ {
		var b Batch
		n := 1
		if i == 13 {
			n = 10
		}
		for j := 0; j < n; j++ {
			b.PutMessage("c", &QueuedMessage{Seq: uint64(100*i + j), Msg: &message.Message{Topic: "t"}})
		}
		wg.Add(1)
		if err := s.Commit(context.Background(), &b, func(err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	wg.Wait()
	want := make([]int, 21)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(order, want) {
		t.Fatalf("done order %v", order)
	}
	// The hold batch alone, then transactions cut once they reach 8 ops:
	// batches 1-8, 9-12 + the 10-op batch 13 (14 ops), 14-21.
	if got := rec.batchSizes(); !slices.Equal(got, []int{1, 8, 5, 8}) {
		t.Fatalf("batches per transaction %v, want [1 8 5 8]", got)
	}
}

func TestConcurrentCommittersCompleteInEachCallersOrder(t *testing.T) {
	const writers, each = 8, 50
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{Fsync: FsyncNever, QueueLen: 4})
	var (
		mu   sync.Mutex
		last = map[int]int{}
		wg   sync.WaitGroup
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= each; i++ {
				var b Batch
				b.PutInbound(fmt.Sprint("c", w), uint16(i))
				err := s.Commit(context.Background(), &b, func(err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil || last[w] != i-1 {
						t.Errorf("writer %d: batch %d completed after %d (err %v)", w, i, last[w], err)
					}
					last[w] = i
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var b Batch // an empty batch is a barrier: done runs after every earlier batch
	if err := s.CommitWait(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for w := 0; w < writers; w++ {
		if last[w] != each {
			t.Fatalf("writer %d: %d of %d batches done at the barrier", w, last[w], each)
		}
		if ids, _ := s.LoadInbound(fmt.Sprint("c", w)); len(ids) != each {
			t.Fatalf("writer %d: %d ids stored", w, len(ids))
		}
	}
}

func TestCommitBlocksWhileQueueFullUntilCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{QueueLen: 1})
		release := holdWriter(t, s)
		done := make(chan string, 3)
		put := func(topic string) *Batch {
			var b Batch
			b.PutRetained(&message.Message{Topic: topic})
			return &b
		}
		if err := s.Commit(context.Background(), put("queued"), func(error) { done <- "queued" }); err != nil {
			t.Fatal(err)
		}
		// The queue (1 slot) is full: a commit blocks, and gives up with its ctx.
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() { errc <- s.Commit(ctx, put("cancelled"), func(error) { done <- "cancelled" }) }()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("Commit on a full queue returned %v instead of blocking", err)
		default:
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit on a full queue with a cancelled ctx: %v", err)
		}
		// A commit without deadline waits for room and is then queued.
		go func() { errc <- s.Commit(context.Background(), put("waited"), func(error) { done <- "waited" }) }()
		synctest.Wait()
		release()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if a, b := <-done, <-done; a != "queued" || b != "waited" {
			t.Fatalf("completions %s, %s", a, b)
		}
		c := load(t, s)
		if len(c.retained) != 3 || c.retained[0].Topic != "hold" || c.retained[1].Topic != "queued" || c.retained[2].Topic != "waited" {
			t.Fatalf("retained %+v", c.retained)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCommitErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, Options{})
	never := func(error) { t.Error("done called for a rejected commit") }

	var bad Batch
	bad.PutInbound("c", 0)
	if err := s.Commit(context.Background(), &bad, never); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid batch: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b Batch
	b.PutInbound("c", 1)
	if err := s.Commit(ctx, &b, never); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}

	// Close drains what is queued, then refuses commits.
	release := holdWriter(t, s)
	drained := make(chan error, 1)
	if err := s.Commit(context.Background(), &b, func(err error) { drained <- err }); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("batch queued before Close: %v", err)
	}
	if err := s.Commit(context.Background(), &b, never); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after Close: %v", err)
	}
	if err := s.CommitWait(context.Background(), &b); !errors.Is(err, ErrClosed) {
		t.Fatalf("CommitWait after Close: %v", err)
	}
	if err := s.LoadSessions(func(*SessionRecord) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("load after Close: %v", err)
	}
	s = openStore(t, path, Options{})
	if ids, err := s.LoadInbound("c"); err != nil || !slices.Equal(ids, []uint16{1}) {
		t.Fatalf("drained batch after reopen: %v %v", ids, err)
	}
}

func TestWriteFailureIsSticky(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{})
	// Inject a failure under the writer: the bbolt file goes away.
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.PutInbound("c", 1)
	if err := s.CommitWait(context.Background(), &b); !errors.Is(err, ErrFailed) || !errors.Is(err, bolt.ErrDatabaseNotOpen) {
		t.Fatalf("commit on a broken file: %v, want ErrFailed wrapping the cause", err)
	}
	if err := s.Commit(context.Background(), &b, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("commit after a failure: %v, want ErrFailed", err)
	}
}

func TestBatchModeSyncsPeriodicallyOnlyWhenDirty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktest.New(time.Unix(1000, 0))
		rec := &recorder{}
		s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{Fsync: FsyncBatch, Clock: clk, Observer: rec, SyncInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		syncs := func() int { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.syncs }
		tick := func() { clk.Advance(time.Second); synctest.Wait() }

		tick()
		if n := syncs(); n != 0 {
			t.Fatalf("%d syncs with nothing written", n)
		}
		commit(t, s, func(b *Batch) { b.PutInbound("c", 1) })
		if n := syncs(); n != 0 {
			t.Fatalf("FsyncBatch synced before done: %d", n)
		}
		tick()
		if n := syncs(); n != 1 {
			t.Fatalf("%d syncs after one interval with a write, want 1", n)
		}
		tick()
		if n := syncs(); n != 1 {
			t.Fatalf("%d syncs after an idle interval, want still 1", n)
		}
		commit(t, s, func(b *Batch) { b.PutInbound("c", 2) })
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := syncs(); n != 2 {
			t.Fatalf("%d syncs after Close with unsynced data, want 2", n)
		}
	})
}

func TestAlwaysModeNeverSyncsExplicitly(t *testing.T) {
	rec := &recorder{}
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{Observer: rec})
	commit(t, s, func(b *Batch) { b.PutInbound("c", 1) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.syncs != 0 || len(rec.commits) != 1 || rec.commits[0].Ops != 1 || rec.commits[0].Write <= 0 {
		t.Fatalf("observed %d syncs and commits %+v; want 0 and one 1-op commit with a write time", rec.syncs, rec.commits)
	}
}

func TestFsyncModeNames(t *testing.T) {
	for _, c := range []struct {
		in   string
		want FsyncMode
	}{{"always", FsyncAlways}, {"Batch", FsyncBatch}, {"NEVER", FsyncNever}} {
		got, err := ParseFsyncMode(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseFsyncMode(%q) = %v, %v", c.in, got, err)
		}
		var m FsyncMode
		text, _ := c.want.MarshalText()
		if err := m.UnmarshalText(text); err != nil || m != c.want || string(text) != c.want.String() {
			t.Errorf("text round trip of %v: %q -> %v, %v", c.want, text, m, err)
		}
	}
	for _, bad := range []string{"", "sometimes", "always "} {
		if _, err := ParseFsyncMode(bad); !errors.Is(err, ErrOptions) {
			t.Errorf("ParseFsyncMode(%q): %v, want ErrOptions", bad, err)
		}
	}
	if s := FsyncMode(7).String(); s != "FsyncMode(7)" {
		t.Errorf("String of an unknown mode: %q", s)
	}
	if _, err := FsyncMode(7).MarshalText(); !errors.Is(err, ErrOptions) {
		t.Errorf("MarshalText of an unknown mode: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), Options{Fsync: 3}); !errors.Is(err, ErrOptions) {
		t.Errorf("Open with an unknown mode: %v", err)
	}
}

// rawUpdate changes the file behind the store's back.
func rawUpdate(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesNewerOrForeignSchema(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s := openStore(t, path, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte{0, 0, 0, 2}) })
	if _, err := Open(path, Options{}); !errors.Is(err, ErrSchema) {
		t.Fatalf("newer schema: %v, want ErrSchema", err)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte{1}) })
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("malformed schema version: %v, want ErrCorrupt", err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	rawUpdate(t, foreign, func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
	if _, err := Open(foreign, Options{}); !errors.Is(err, ErrSchema) {
		t.Fatalf("foreign bbolt file: %v, want ErrSchema", err)
	}
}

func TestCorruptRecordsSurfaceOnLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, Options{})
	commit(t, s, func(b *Batch) {
		b.PutSession(&SessionRecord{ClientID: "c", Version: 5})
		b.PutMessage("c", &QueuedMessage{Seq: 1, Msg: &message.Message{Topic: "t"}})
		b.PutInbound("c", 1)
		b.PutRetained(&message.Message{Topic: "t"})
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		garbage := []byte{1, 0xff, 0xff}
		return errors.Join(
			tx.Bucket(bucketSessions).Put([]byte("c"), garbage),
			tx.Bucket(bucketMessages).Bucket([]byte("c")).Put(seqKey(1), garbage),
			tx.Bucket(bucketInbound).Bucket([]byte("c")).Put([]byte{0, 1}, garbage),
			tx.Bucket(bucketRetained).Put([]byte("t"), garbage),
		)
	})
	s = openStore(t, path, Options{})
	for name, err := range map[string]error{
		"session":  s.LoadSessions(func(*SessionRecord) error { return nil }),
		"message":  s.LoadMessages("c", func(*QueuedMessage) error { return nil }),
		"retained": s.LoadRetained(func(*message.Message) error { return nil }),
	} {
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := s.LoadInbound("c"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("inbound: %v, want ErrCorrupt", err)
	}
}

func TestLoadsCrossChunksAndStopOnCallbackError(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{})
	const n = 2*scanChunk + 3
	commit(t, s, func(b *Batch) {
		for i := 1; i <= n; i++ {
			b.PutMessage("c", &QueuedMessage{Seq: uint64(i), Msg: &message.Message{Topic: "t"}})
			b.PutRetained(&message.Message{Topic: fmt.Sprintf("t/%04d", i)})
		}
	})
	var seqs []uint64
	if err := s.LoadMessages("c", func(q *QueuedMessage) error {
		seqs = append(seqs, q.Seq)
		if q.Seq == scanChunk { // callbacks run outside read transactions, so they may commit
			commit(t, s, func(b *Batch) { b.PutInbound("c", 1) })
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != n || !slices.IsSorted(seqs) || seqs[0] != 1 {
		t.Fatalf("loaded %d seqs (sorted %v)", len(seqs), slices.IsSorted(seqs))
	}
	stop := errors.New("stop")
	count := 0
	err := s.LoadRetained(func(*message.Message) error {
		if count++; count == scanChunk+1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || count != scanChunk+1 {
		t.Fatalf("callback error: %v after %d calls", err, count)
	}
}

// TestDeleteRetainedTombstoneOnlyDeletesThatTombstone: the conditional
// delete removes a deletion tombstone with the given stamp, and leaves a
// message stored since (in an earlier batch or the same one), a newer
// tombstone, and a missing record alone.
func TestDeleteRetainedTombstoneOnlyDeletesThatTombstone(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"), Options{})
	tomb := func(topic string, stamp uint64) *message.Message {
		return &message.Message{Topic: topic, Retain: true, Stamp: stamp, Origin: "n1"}
	}
	commit(t, s, func(b *Batch) {
		b.PutRetained(tomb("gone", 7))
		b.PutRetained(tomb("newer", 9))
		b.PutRetained(tomb("replaced", 7))
		b.PutRetained(tomb("same-batch", 7))
	})
	commit(t, s, func(b *Batch) {
		m := sampleMessage("replaced", "back")
		m.Stamp = 8
		b.PutRetained(m)
	})
	commit(t, s, func(b *Batch) {
		for _, topic := range []string{"gone", "newer", "replaced", "absent"} {
			b.DeleteRetainedTombstone(topic, 7)
		}
		b.DeleteRetainedTombstone("same-batch", 7)
		b.PutRetained(sampleMessage("same-batch", "new"))
	})
	got := map[string]string{}
	for _, m := range load(t, s).retained {
		got[m.Topic] = fmt.Sprintf("%q@%d", m.Payload, m.Stamp)
	}
	want := map[string]string{"newer": `""@9`, "replaced": `"back"@8`, "same-batch": `"new"@0`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("retained after the conditional deletes: %v, want %v", got, want)
	}
}

// TestOpenHeldFileSaysSo: a file another holder has open (another node on
// the same data directory) is refused with ErrLocked and a message that
// says what is going on, not bbolt's bare "timeout".
func TestOpenHeldFileSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	openStore(t, path, Options{})
	_, err := Open(path, Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "another process") || !strings.Contains(err.Error(), "data-dir") {
		t.Fatalf("second open: %v; want ErrLocked naming another process and the data-dir", err)
	}
}

// TestBarrierDoesNotWaitForLaterBatches: an empty batch completes once the
// batches queued before it have, even when the transaction that takes it
// also writes batches queued after it (their data is not yet there when it
// completes). A session waiting for a publish's batch (a held delivery's
// packet id) must not wait for a deletion queued behind it.
func TestBarrierDoesNotWaitForLaterBatches(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{Fsync: FsyncNever})
	ctx := context.Background()
	// The first batch's done holds the writer, so the barrier and the
	// batch behind it are queued together and taken in one group.
	hold, held := make(chan struct{}), make(chan struct{})
	var first Batch
	first.PutMessage("c", &QueuedMessage{Seq: 1, Msg: &message.Message{Topic: "t", Payload: []byte("1")}, QoS: 1})
	if err := s.Commit(ctx, &first, func(error) { close(held); <-hold }); err != nil {
		t.Fatal(err)
	}
	<-held
	seen := make(chan int, 1)
	var barrier Batch
	if err := s.Commit(ctx, &barrier, func(err error) {
		if err != nil {
			t.Error(err)
		}
		n := 0
		if err := s.LoadMessagesFrom("c", 0, 10, func(*QueuedMessage) error { n++; return nil }); err != nil {
			t.Error(err)
		}
		seen <- n
	}); err != nil {
		t.Fatal(err)
	}
	var later Batch
	later.PutMessage("c", &QueuedMessage{Seq: 2, Msg: &message.Message{Topic: "t", Payload: []byte("2")}, QoS: 1})
	laterDone := make(chan error, 1)
	if err := s.Commit(ctx, &later, func(err error) { laterDone <- err }); err != nil {
		t.Fatal(err)
	}
	close(hold)
	if n := <-seen; n != 1 {
		t.Fatalf("the barrier completed with %d messages stored, want 1: it waited for the batch queued after it", n)
	}
	if err := <-laterDone; err != nil {
		t.Fatal(err)
	}
}
