package topiclog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// crashStep is one step of a crash workload: a batch to append, or (if
// batch is nil) a retention pass.
type crashStep struct {
	batch []Entry
	ret   Retention
	now   time.Time
}

func crashWorkload(rng *rand.Rand, steps int) []crashStep {
	var out []crashStep
	now := epoch
	mark := uint64(0)
	for range steps {
		if rng.IntN(8) == 0 {
			out = append(out, crashStep{ret: Retention{MaxRecordsPerTopic: uint64(3 + rng.IntN(10))}, now: now})
			continue
		}
		batch := make([]Entry, 1+rng.IntN(6))
		for i := range batch {
			now = now.Add(time.Second)
			mark++
			batch[i] = Entry{Topic: fmt.Sprintf("t/%d", rng.IntN(3)), Payload: bytes.Repeat([]byte{byte(mark)}, rng.IntN(300)),
				Time: now, Mark: mark, Retain: rng.IntN(4) == 0}
		}
		out = append(out, crashStep{batch: batch})
	}
	return out
}

// crashProbe records, at the instant of the simulated crash, the clone of
// the filesystem and what the workload had been told so far.
type crashProbe struct {
	at      int // mutating operation to crash before
	count   int
	clone   *MemFS
	acked   uint64 // NextSeq after the last acknowledged batch
	pending uint64 // records of the batch in flight, if any
	first   [2]uint64
	step    int // workload step during which the clone was taken
	cur     int // step being run
}

var mutating = map[Op]bool{OpCreate: true, OpRemove: true, OpRename: true, OpSyncDir: true, OpWrite: true, OpSync: true, OpTruncate: true}

// TestCrashPoints crashes a workload before each of its mutating file
// operations in turn (segment rolls, retention, recovery included) and
// checks what Open recovers from the crash: with SyncAlways, exactly the
// acknowledged batches, plus the one in flight whole or not at all; then that the recovered log, appended to, is
// byte-identical to a log that was only ever fed the surviving records.
func TestCrashPoints(t *testing.T) {
	for _, seed := range seeds(1, 2, 3) {
		rng := newRand(t, seed)
		steps := crashWorkload(rng, 60)
		opts := Options{SegmentBytes: MinSegmentBytes}
		total := runCrashWorkload(t, steps, opts, &crashProbe{at: -1})
		torn := 0
		for at := 0; at < total; at++ {
			p := &crashProbe{at: at}
			m := newModel()
			runCrashWorkloadModel(t, steps, opts, p, m)
			if p.clone == nil {
				t.Fatalf("crash point %d of %d not reached", at, total)
			}
			l, err := Open(p.clone, "g", opts)
			if err != nil {
				t.Fatalf("crash before op %d: open: %v", at, err)
			}
			torn += l.Recovery().TornTails
			next := l.NextSeq()
			if next != p.acked && next != p.acked+p.pending {
				t.Fatalf("crash before op %d: log ends at %d; acknowledged up to %d, %d in flight (a batch is all or nothing)", at, next, p.acked, p.pending)
			}
			if first := l.FirstSeq(); first < p.first[0] || first > p.first[1] {
				t.Fatalf("crash before op %d: log starts at %d, want within %v", at, first, p.first)
			}
			m.truncate(next)
			m.first = l.FirstSeq()
			checkAll(t, l, m)
			checkLikeTwin(t, l, p.clone, m, opts)
			l.Close()
		}
		t.Logf("%d crash points, %d torn tails truncated", total, torn)
		if torn == 0 {
			t.Errorf("no crash point left a torn tail")
		}
	}
}

func runCrashWorkload(t *testing.T, steps []crashStep, opts Options, p *crashProbe) int {
	runCrashWorkloadModel(t, steps, opts, p, newModel())
	return p.count
}

// runCrashWorkloadModel runs the workload on a fresh MemFS, cloning it
// before mutating operation p.at, and keeps m up to date.
func runCrashWorkloadModel(t *testing.T, steps []crashStep, opts Options, p *crashProbe, m *model) {
	t.Helper()
	mem := NewMemFS()
	efs := &ErrorFS{FS: mem, Inject: func(op Op, name string) error {
		if !mutating[op] {
			return nil
		}
		if p.count == p.at {
			p.clone = mem.CrashClone(uint64(p.at))
			p.step = p.cur
		}
		p.count++
		return nil
	}}
	setProbe := func(pending uint64, firstAfter uint64) {
		if p.clone == nil {
			p.acked, p.pending, p.first = m.next(), pending, [2]uint64{m.first, firstAfter}
		}
	}
	setProbe(0, 1)
	p.cur = -1
	l, err := Open(efs, "g", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, s := range steps {
		p.cur = i
		if s.batch == nil {
			rm, err := l.ApplyRetention(s.ret, s.now)
			if err != nil {
				t.Fatal(err)
			}
			// The crash may have happened during this pass: before it,
			// the first position was m.first; after it, rm.FirstSeq.
			if p.clone != nil && p.step == i {
				p.first[1] = rm.FirstSeq
			}
			m.first = rm.FirstSeq
			setProbe(0, m.first)
			continue
		}
		setProbe(uint64(len(s.batch)), m.first)
		if _, err := l.AppendBatch(s.batch); err != nil {
			t.Fatal(err)
		}
		m.addBatch(s.batch...)
		setProbe(0, m.first)
	}
}

// checkLikeTwin feeds a fresh log the model's batches, appends one more
// batch to both, and checks that each segment file of l equals the twin's.
func checkLikeTwin(t *testing.T, l *Log, mem *MemFS, m *model, opts Options) {
	t.Helper()
	twinFS := NewMemFS()
	twin := openLog(t, twinFS, opts)
	defer twin.Close()
	for _, b := range m.batches() {
		appendOK(t, twin, b...)
	}
	more := []Entry{entry("t/0", 1000), entry("t/new", 1001)}
	appendOK(t, l, more...)
	appendOK(t, twin, more...)
	want := segmentFiles(t, twinFS)
	for name, b := range segmentFiles(t, mem) {
		if !bytes.Equal(b, want[name]) {
			t.Fatalf("segment %s after recovery differs from the twin's (%d vs %d bytes)", name, len(b), len(want[name]))
		}
	}
}

// TestCrashKeepsOnlySyncedData: with SyncNone, a crash keeps what was
// synced (sealed segments, each segment's first batch, everything before
// Close) and at most a prefix of the rest, truncated to whole records.
func TestCrashKeepsOnlySyncedData(t *testing.T) {
	for _, seed := range seeds(7, 8, 9, 10) {
		rng := newRand(t, seed)
		mem := NewMemFS()
		opts := Options{Sync: SyncNone, SegmentBytes: 4 << 10}
		l := openLog(t, mem, opts)
		m := newModel()
		for i := range 40 {
			e := entry(fmt.Sprint("t/", i%3), i+1)
			e.Payload = bytes.Repeat([]byte{byte(i)}, 100)
			appendOK(t, l, e)
			m.add(e)
		}
		if err := l.Close(); err != nil { // syncs
			t.Fatal(err)
		}
		synced := m.next()
		l = openLog(t, mem, opts)
		for i := 40; i < 60; i++ {
			e := entry("t/0", i+1)
			e.Payload = bytes.Repeat([]byte{byte(i)}, 100)
			appendOK(t, l, e)
			m.add(e)
		}
		crashed := mem.CrashClone(rng.Uint64())
		l.Close()
		l = openLog(t, crashed, opts)
		next := l.NextSeq()
		if next < synced || next > m.next() {
			t.Fatalf("after the crash the log ends at %d; synced up to %d, appended up to %d", next, synced, m.next())
		}
		t.Logf("kept %d of %d unsynced records; torn tail: %+v", next-synced, m.next()-synced, l.Recovery())
		m.truncate(next)
		checkAll(t, l, m)
		l.Close()
	}
}
