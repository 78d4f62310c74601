package topiclog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAgainstModel runs seeded random operations (appends, reads, retention,
// reopen, crash, snapshot and restore) on logs of several configurations
// and compares every result with the model.
func TestAgainstModel(t *testing.T) {
	configs := []struct {
		opts   Options
		topics int
	}{
		{Options{SegmentBytes: MinSegmentBytes}, 1},
		{Options{SegmentBytes: MinSegmentBytes, Sync: SyncNone}, 3},
		{Options{SegmentBytes: 4 << 10}, 5},
		{Options{SegmentBytes: 4 << 10, SegmentAge: time.Minute, Sync: SyncNone}, 20},
		{Options{SegmentBytes: 64 << 10, SegmentAge: 10 * time.Second}, 2},
		{Options{SegmentAge: time.Minute}, 4},
	}
	for ci, c := range configs {
		t.Run(modelName(c.opts, c.topics), func(t *testing.T) {
			for _, seed := range seeds(uint64(100+ci), uint64(200+ci)) {
				runModel(t, seed, c.opts, c.topics, 400)
			}
		})
	}
}

type modelRun struct {
	t      *testing.T
	rng    *rand.Rand
	opts   Options
	topics []string
	fs     *MemFS
	l      *Log
	m      *model
	now    time.Time
	mark   uint64
	// What the run exercised, logged at its end so a reader can see the
	// operations did something.
	deleted, torn, lost, restored, maxSegs, compactedReads int
}

func runModel(t *testing.T, seed uint64, opts Options, ntopics, ops int) {
	r := &modelRun{t: t, rng: newRand(t, seed), opts: opts, fs: NewMemFS(), m: newModel(), now: epoch}
	for i := range ntopics {
		r.topics = append(r.topics, fmt.Sprintf("sensors/%d/temp", i))
	}
	r.l = openLog(t, r.fs, opts)
	defer func() { r.l.Close() }()
	for op := 0; op < ops; op++ {
		switch p := r.rng.IntN(100); {
		case p < 45:
			r.append()
		case p < 70:
			r.reads()
		case p < 80:
			r.retention()
		case p < 85:
			r.reopen()
		case p < 91:
			r.crash()
		case p < 97:
			r.snapshot()
		default:
			checkAll(t, r.l, r.m)
		}
	}
	checkAll(t, r.l, r.m)
	t.Logf("records %d, segments deleted %d, torn tails %d, records lost in crashes %d, restores %d, max segments %d, compacted reads %d",
		r.m.next()-1, r.deleted, r.torn, r.lost, r.restored, r.maxSegs, r.compactedReads)
	if r.deleted == 0 || r.restored == 0 || r.maxSegs < 2 {
		t.Errorf("the run exercised too little: tune it")
	}
}

func (r *modelRun) topic() string { return r.topics[r.rng.IntN(len(r.topics))] }

func (r *modelRun) append() {
	n := r.rng.IntN(8)
	if r.rng.IntN(10) == 0 {
		n = 40 + r.rng.IntN(100)
	}
	es := make([]Entry, n)
	for i := range es {
		r.now = r.now.Add(time.Duration(r.rng.IntN(5000)) * time.Millisecond)
		size := r.rng.IntN(200)
		if r.rng.IntN(20) == 0 {
			size = 2000 + r.rng.IntN(3000) // above the smallest segment size
		}
		payload := make([]byte, size)
		for j := range payload {
			payload[j] = byte(r.rng.Uint32())
		}
		r.mark++
		// Times mostly rise but sometimes step back: they are the
		// caller's, and the log must not assume order.
		jitter := time.Duration(r.rng.IntN(4000)-2000) * time.Millisecond
		es[i] = Entry{Topic: r.topic(), Payload: payload, Time: r.now.Add(jitter), Mark: r.mark, Retain: r.rng.IntN(8) == 0}
	}
	a, err := r.l.AppendBatch(es)
	if err != nil {
		r.t.Fatalf("append %d: %v", n, err)
	}
	if a.FirstSeq != r.m.next() || len(a.Indexes) != n {
		r.t.Fatalf("appended %+v, want first %d and %d indexes", a, r.m.next(), n)
	}
	for i, rec := range r.m.addBatch(es...) {
		if a.Indexes[i] != rec.Index {
			r.t.Fatalf("entry %d got index %d, want %d", i, a.Indexes[i], rec.Index)
		}
	}
	r.maxSegs = max(r.maxSegs, len(r.l.Segments()))
}

func (r *modelRun) reads() {
	t, m := r.t, r.m
	for range 5 {
		topic := r.topic()
		if r.rng.IntN(10) == 0 {
			topic = "never/seen"
		}
		last := uint64(len(m.byTopic[topic]))
		index := uint64(r.rng.IntN(int(last) + 3))
		maxBytes := 0
		if r.rng.IntN(2) == 0 {
			maxBytes = r.rng.IntN(3000)
		}
		if index < m.firstIndex(topic) {
			r.compactedReads++
		}
		checkGet(t, r.l, m, topic, index)
		checkRange(t, r.l, m, topic, index, 1+r.rng.IntN(30), maxBytes)
		checkReadSeq(t, r.l, m, uint64(r.rng.IntN(int(m.next())+2)), 1+r.rng.IntN(50), maxBytes)
	}
}

func (r *modelRun) retention() {
	var ret Retention
	switch r.rng.IntN(4) {
	case 0:
		ret.MaxRecordsPerTopic = uint64(1 + r.rng.IntN(40))
	case 1:
		ret.MaxBytes = int64(r.rng.IntN(20000))
	case 2:
		ret.MaxAge = time.Duration(1+r.rng.IntN(120)) * time.Second
	default:
		ret = Retention{MaxRecordsPerTopic: uint64(1 + r.rng.IntN(40)), MaxBytes: int64(r.rng.IntN(40000)), MaxAge: time.Duration(1+r.rng.IntN(300)) * time.Second}
	}
	segs := r.l.Segments()
	rm, err := r.l.ApplyRetention(ret, r.now)
	if err != nil {
		r.t.Fatalf("retention: %v", err)
	}
	checkRetention(r.t, r.m, segs, rm, ret, r.now)
	r.deleted += rm.Segments
	r.m.first = rm.FirstSeq
	checkAll(r.t, r.l, r.m)
}

func (r *modelRun) reopen() {
	if err := r.l.Close(); err != nil {
		r.t.Fatalf("close: %v", err)
	}
	r.l = openLog(r.t, r.fs, r.opts)
	if rec := r.l.Recovery(); rec.TornTails != 0 {
		r.t.Fatalf("a clean reopen found a torn tail: %+v", rec)
	}
	checkAll(r.t, r.l, r.m)
}

// crash opens the log on what a crash would leave: with SyncAlways every
// appended batch survives; with SyncNone a suffix of the last segment may
// be lost, never more.
func (r *modelRun) crash() {
	segs := r.l.Segments()
	last := segs[len(segs)-1]
	crashed := r.fs.CrashClone(r.rng.Uint64())
	r.l.Close() // the old FS's files are no longer used
	r.fs = crashed
	r.l = openLog(r.t, r.fs, r.opts)
	next := r.l.NextSeq()
	if r.opts.Sync == SyncAlways && next != r.m.next() {
		r.t.Fatalf("after a crash the log ends at %d; every batch was synced, so want %d", next, r.m.next())
	}
	min := last.FirstSeq
	if last.Records > 0 {
		min++ // a segment's first batch is synced with its header
	}
	if next > r.m.next() || next < min {
		r.t.Fatalf("after a crash the log ends at %d, want within [%d, %d]", next, min, r.m.next())
	}
	if next > 1 && !r.m.ends[next-1] {
		r.t.Fatalf("after a crash the log ends at %d, inside a batch", next)
	}
	r.lost += int(r.m.next() - next)
	r.torn += r.l.Recovery().TornTails
	r.m.truncate(next)
	checkAll(r.t, r.l, r.m)
}

// snapshot takes a snapshot, appends a little more, then restores the
// snapshot into a fresh log (which must equal the model as it was) or
// into the live log itself (which must go back to it).
func (r *modelRun) snapshot() {
	snap, err := r.l.Snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	at := r.m.clone()
	before := segmentFiles(r.t, r.fs)
	r.append()
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		r.t.Fatalf("snapshot: %v", err)
	}
	snap.Release()
	if r.rng.IntN(3) == 0 {
		if err := r.l.Restore(&buf); err != nil {
			r.t.Fatalf("restore into the live log: %v", err)
		}
		r.m = at
		r.restored++
		checkAll(r.t, r.l, r.m)
		return
	}
	fresh := NewMemFS()
	l2 := openLog(r.t, fresh, r.opts)
	defer l2.Close()
	if err := l2.Restore(&buf); err != nil {
		r.t.Fatalf("restore: %v", err)
	}
	r.restored++
	checkAll(r.t, l2, at)
	// The restored files are the source's, byte for byte.
	got := segmentFiles(r.t, fresh)
	if len(got) != len(before) {
		r.t.Fatalf("restored %d segment files, source had %d", len(got), len(before))
	}
	for name, b := range got {
		if !bytes.Equal(b, before[name]) {
			r.t.Fatalf("restored %s differs from the source", name)
		}
	}
}
