package sequencer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// TestRetentionTick: a tick applies its bounds at its entry's time, the
// same on every replica; records it removes leave the dedup window (a
// retry of one is appended again), records it keeps do not.
func TestRetentionTick(t *testing.T) {
	g := newReplicas(t, 2, Options{Log: smallSegments})
	index := uint64(0)
	var first []Published
	for i := range 120 {
		index++
		res := g.commit(entry(t, index, PublishCommand(pub("a", fmt.Sprintf("message %03d", i), "c", uint16(1+i), uint64(i)))))
		first = append(first, res[0].Publishes[0])
	}
	index++
	tick := g.commit(entry(t, index, RetentionCommand(topiclog.Retention{MaxRecordsPerTopic: 30})))[0]
	if tick.Err != nil || tick.Removed.Segments == 0 || tick.Removed.FirstSeq <= 1 {
		t.Fatalf("tick: %+v", tick)
	}
	s := g.seqs[0]
	lo, hi, _ := s.Bounds("a")
	if lo != tick.Removed.FirstSeq || hi != 120 || hi-lo+1 < 30 {
		t.Fatalf("bounds [%d, %d] after removing up to %d", lo, hi, tick.Removed.FirstSeq)
	}
	if _, err := s.Get("a", 1); !errors.Is(err, topiclog.ErrCompacted) {
		t.Fatalf("get removed record: %v", err)
	}
	checkRebuild(t, s)
	if s.Stats().DedupEntries != int(hi-lo+1) {
		t.Fatalf("%d dedup entries, %d records kept", s.Stats().DedupEntries, hi-lo+1)
	}
	// Retries: of a removed record (appended again), of a kept one (a
	// duplicate).
	index++
	got := g.commit(entry(t, index, PublishCommand(pub("a", "message 000", "c", 1, 0), pub("a", "message 119", "c", 120, 119))))[0].Publishes
	if got[0].Duplicate || got[0].Index != 121 || got[1] != (Published{Index: 120, Seq: first[119].Seq, Duplicate: true}) {
		t.Fatalf("retries after retention: %+v", got)
	}
	// Age: the tick's now is its entry's time (index seconds after t0), so
	// records older than an hour before the tick go.
	index += 7200
	tick = g.commit(entry(t, index, RetentionCommand(topiclog.Retention{MaxAge: time.Hour})))[0]
	if tick.Removed.Segments == 0 {
		t.Fatalf("age tick removed nothing: %+v", tick)
	}
	// The tick given again (a restart with it after the last mark) removes
	// nothing more.
	if again := apply(t, g.seqs[1], entry(t, index, RetentionCommand(topiclog.Retention{MaxAge: time.Hour})))[0]; again.Removed.Segments != 0 {
		t.Fatalf("tick given again removed %+v", again.Removed)
	}
	g.same()
}

func TestRefusedEntries(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{})
	good := entry(t, 1, PublishCommand(pub("a", "m", "c", 1, 1)))
	bad := []Entry{
		{Index: 2, Time: t0, Cmd: []byte("garbage")},
		{Index: 3, Time: t0, Cmd: nil},
		{Index: 4, Time: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), Cmd: good.Cmd}, // beyond the log's time range
		{Index: 5, Time: t0, Cmd: append([]byte{2}, good.Cmd[1:]...)},                // another version
	}
	res := apply(t, s, append([]Entry{good}, bad...)...)
	for i, r := range res[1:] {
		if !errors.Is(r.Err, ErrInvalid) || r.Publishes != nil {
			t.Errorf("entry %d: %+v, want refused as invalid", bad[i].Index, r)
		}
	}
	if s.NextSeq() != 2 || s.Applied() != 5 {
		t.Fatalf("next position %d, applied %d: refused entries must change nothing but Applied", s.NextSeq(), s.Applied())
	}
}

// TestSnapshotRoundTrip: a snapshot taken while entries keep being applied
// restores, on another replica, the state as of the snapshot (log bytes,
// dedup table, applied index); both then give the same results. A damaged
// snapshot, or one kept under another horizon, leaves the state alone.
func TestSnapshotRoundTrip(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	opts := Options{Log: smallSegments, Horizon: 50}
	fa := topiclog.NewMemFS()
	a := open(t, fa, opts)
	apply(t, a, w.next(t, 60)...)
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	applied, table := a.Applied(), tableString(a.table)
	wantFiles := files(t, fa)
	later := w.next(t, 30)
	want := apply(t, a, later...) // Apply goes on before Persist
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	fb := topiclog.NewMemFS()
	b := open(t, fb, opts)
	apply(t, b, entry(t, 1, PublishCommand(pub("x", "old state", "z", 1, 1))))
	if err := b.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if b.Applied() != applied || tableString(b.table) != table {
		t.Fatalf("restored applied %d (want %d), table %s (want %s)", b.Applied(), applied, tableString(b.table), table)
	}
	sameFiles(t, "restored and source at the snapshot", files(t, fb), wantFiles)
	got := apply(t, b, later...)
	for i := range got {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("entry %d after restore: %+v, source %+v", later[i].Index, got[i], want[i])
		}
	}
	sameFiles(t, "restored and source after the same entries", files(t, fb), files(t, fa))

	// Damaged or foreign snapshots change nothing.
	before := files(t, fb)
	damaged := bytes.Clone(buf.Bytes())
	damaged[snapHeaderLen+2] ^= 0xff
	other := open(t, topiclog.NewMemFS(), Options{Log: smallSegments, Horizon: 51})
	for name, tc := range map[string]struct {
		s    *Sequencer
		data []byte
		err  error
	}{
		"damaged table":   {b, damaged, ErrCorrupt},
		"truncated":       {b, buf.Bytes()[:buf.Len()/2], topiclog.ErrCorrupt},
		"not a snapshot":  {b, []byte("SXTLSNAP"), ErrCorrupt},
		"another horizon": {other, buf.Bytes(), ErrInvalid},
	} {
		if err := tc.s.Restore(bytes.NewReader(tc.data)); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", name, err, tc.err)
		}
	}
	sameFiles(t, "after refused restores", files(t, fb), before)
	if b.Applied() != a.Applied() {
		t.Fatalf("a refused restore moved applied to %d", b.Applied())
	}
}

func TestReads(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{})
	retained := pub("r", "kept", "c", 2, 2)
	retained.Retain, retained.QoS = true, 2
	apply(t, s,
		entry(t, 1, PublishCommand(pub("a", "one", "c", 1, 1), retained, Publish{Topic: "a", Message: []byte("two")})),
		entry(t, 2, PublishCommand(Publish{Topic: "r", Message: []byte("not kept")})),
	)
	recs, err := s.ReadSeq(1, 10, 0)
	if err != nil || len(recs) != 4 {
		t.Fatalf("read: %d records, %v", len(recs), err)
	}
	want := []Record{
		{Seq: 1, Topic: "a", Index: 1, QoS: 1, Key: Key{"c", 1, 1}, Message: []byte("one"), Mark: 1},
		{Seq: 2, Topic: "r", Index: 1, QoS: 2, Key: Key{"c", 2, 2}, Message: []byte("kept"), Mark: 1, Retain: true},
		{Seq: 3, Topic: "a", Index: 2, Message: []byte("two"), Mark: 1},
		{Seq: 4, Topic: "r", Index: 2, Message: []byte("not kept"), Mark: 2},
	}
	for i := range want {
		want[i].Time = t0.Add(time.Duration(want[i].Mark) * time.Second)
		if fmt.Sprint(recs[i]) != fmt.Sprint(want[i]) || !recs[i].Time.Equal(want[i].Time) {
			t.Errorf("record %d: %+v, want %+v", i, recs[i], want[i])
		}
	}
	if r, err := s.LatestRetained("r"); err != nil || string(r.Message) != "kept" {
		t.Errorf("latest retained: %+v, %v", r, err)
	}
	if r, err := s.Latest("r"); err != nil || string(r.Message) != "not kept" {
		t.Errorf("latest: %+v, %v", r, err)
	}
	if rs, err := s.Range("a", 2, 10, 0); err != nil || len(rs) != 1 || string(rs[0].Message) != "two" {
		t.Errorf("range: %+v, %v", rs, err)
	}
	if r, err := s.Get("a", 1); err != nil || string(r.Message) != "one" {
		t.Errorf("get: %+v, %v", r, err)
	}
	if _, err := s.Get("a", 3); !errors.Is(err, topiclog.ErrNotFound) {
		t.Errorf("get beyond the last: %v", err)
	}
	if got := s.Topics(); fmt.Sprint(got) != "[a r]" || s.FirstSeq() != 1 {
		t.Errorf("topics %v, first %d", got, s.FirstSeq())
	}
}

// TestWaitSeq: a waiting reader wakes when a record arrives, not for an
// entry that appended nothing; ctx and Close end the wait.
func TestWaitSeq(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{})
	apply(t, s, entry(t, 1, PublishCommand(pub("a", "m", "c", 1, 1))))
	if err := s.WaitSeq(context.Background(), 1); err != nil {
		t.Fatalf("wait for a record held: %v", err)
	}
	woke := make(chan error, 1)
	go func() { woke <- s.WaitSeq(context.Background(), 2) }()
	changed := s.Changed()
	apply(t, s, entry(t, 2, PublishCommand(pub("a", "m", "c", 1, 1)))) // a duplicate: nothing new
	select {
	case <-changed:
		t.Fatal("an entry that appended nothing signalled a change")
	default:
	}
	apply(t, s, entry(t, 3, PublishCommand(pub("a", "m2", "c", 1, 2))))
	if err := <-woke; err != nil {
		t.Fatalf("wait for record 2: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitSeq(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with an ended context: %v", err)
	}
	go func() { woke <- s.WaitSeq(context.Background(), 10) }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; !errors.Is(err, ErrClosed) {
		t.Fatalf("wait across Close: %v", err)
	}
}

// TestReadsDuringApply: readers following the log with WaitSeq and ReadSeq
// while entries are applied see every record once, in order (run with
// -race).
func TestReadsDuringApply(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{Log: smallSegments})
	const n = 400
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			next := uint64(1)
			for next <= n {
				if err := s.WaitSeq(context.Background(), next); err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				recs, err := s.ReadSeq(next, 16, 0)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				for _, rec := range recs {
					if rec.Seq != next || string(rec.Message) != fmt.Sprint(next) {
						t.Errorf("reader %d: record %d %q, want %d", r, rec.Seq, rec.Message, next)
						return
					}
					next++
				}
			}
		})
	}
	for i := uint64(1); i <= n; i++ {
		apply(t, s, entry(t, i, PublishCommand(Publish{Topic: fmt.Sprint("t", i%7), Message: []byte(fmt.Sprint(i))})))
	}
	wg.Wait()
}

// TestApplyErrorIsFatal: a failed write fails Apply; the sequencer then
// refuses to apply, and once reopened it resumes from the log and applies
// the failed entry as if nothing had happened.
func TestApplyErrorIsFatal(t *testing.T) {
	mem := topiclog.NewMemFS()
	var mu sync.Mutex
	armed := false
	efs := &topiclog.ErrorFS{FS: mem, Inject: func(op topiclog.Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if armed && op == topiclog.OpWrite {
			return topiclog.ErrInjected
		}
		return nil
	}}
	s, err := Open(efs, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, entry(t, 1, PublishCommand(pub("a", "m1", "c", 1, 1))))
	mu.Lock()
	armed = true
	mu.Unlock()
	e2 := entry(t, 2, PublishCommand(pub("a", "m2", "c", 2, 2)))
	if _, err := s.Apply([]Entry{e2}); !errors.Is(err, topiclog.ErrInjected) {
		t.Fatalf("apply with a failing disk: %v", err)
	}
	mu.Lock()
	armed = false
	mu.Unlock()
	if _, err := s.Apply([]Entry{entry(t, 3, PublishCommand(pub("a", "m3", "c", 3, 3)))}); err == nil {
		t.Fatal("a failed sequencer applied another entry")
	}
	if s.Applied() != 1 {
		t.Fatalf("applied %d after the failure, want 1", s.Applied())
	}
	_ = s.Close()
	r := open(t, mem, Options{})
	if r.Applied() != 1 {
		t.Fatalf("reopened at %d", r.Applied())
	}
	if got := published(t, r, e2)[0]; got != (Published{Index: 2, Seq: 2}) {
		t.Fatalf("failed entry applied after reopening: %+v", got)
	}
}
