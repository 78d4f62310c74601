package sequencer

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sextantmq/sextant/internal/topiclog"
)

func TestDedupRules(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{})
	type want struct {
		index, seq uint64
		dup        bool
	}
	steps := []struct {
		name string
		ps   []Publish
		want []want
	}{
		{"first publish appends", []Publish{pub("a", "m1", "c1", 1, 100)}, []want{{1, 1, false}}},
		{"retry with the same nonce is the original", []Publish{pub("a", "m1", "c1", 1, 100)}, []want{{1, 1, true}}},
		{"packet id reused with a new nonce appends", []Publish{pub("a", "m2", "c1", 1, 101)}, []want{{2, 2, false}}},
		{"the new nonce replaced the old one", []Publish{pub("a", "m2", "c1", 1, 101), pub("a", "m1", "c1", 1, 100)}, []want{{2, 2, true}, {3, 3, false}}},
		{"another client's packet id 1 is its own", []Publish{pub("b", "x", "c2", 1, 100)}, []want{{1, 4, false}}},
		{"QoS 0 is never deduplicated", []Publish{{Topic: "a", Message: []byte("q0")}, {Topic: "a", Message: []byte("q0")}}, []want{{4, 5, false}, {5, 6, false}}},
		{"a retry within the entry is the earlier item", []Publish{pub("b", "y", "c2", 2, 7), pub("b", "y", "c2", 2, 7)}, []want{{2, 7, false}, {2, 7, true}}},
		{"a reuse within the entry appends and replaces", []Publish{pub("b", "z", "c2", 3, 8), pub("b", "w", "c2", 3, 9), pub("b", "z", "c2", 3, 9)}, []want{{3, 8, false}, {4, 9, false}, {4, 9, true}}},
	}
	index := uint64(0)
	for _, st := range steps {
		index += 2
		before := s.NextSeq()
		got := published(t, s, entry(t, index, PublishCommand(st.ps...)))
		for i, w := range st.want {
			if got[i] != (Published{Index: w.index, Seq: w.seq, Duplicate: w.dup}) {
				t.Errorf("%s: item %d: %+v, want %+v", st.name, i, got[i], w)
			}
		}
		appended := 0
		for _, w := range st.want {
			if !w.dup {
				appended++
			}
		}
		if s.NextSeq()-before != uint64(appended) {
			t.Errorf("%s: %d records appended, want %d", st.name, s.NextSeq()-before, appended)
		}
		if s.Applied() != index {
			t.Errorf("%s: applied %d, want %d", st.name, s.Applied(), index)
		}
		checkRebuild(t, s)
	}
	if st := s.Stats(); st.Duplicates != 4 || st.DedupEntries != 4 {
		t.Errorf("stats %+v, want 4 duplicates and 4 entries (c1/1, c2/1, c2/2, c2/3)", st)
	}
}

// TestDuplicateEntryLeavesLogBehind: an entry whose publishes are all
// duplicates appends nothing, so the log's last mark stays behind it, but
// Applied() reports it while the sequencer runs.
func TestDuplicateEntryLeavesLogBehind(t *testing.T) {
	fsys := topiclog.NewMemFS()
	s := open(t, fsys, Options{})
	published(t, s, entry(t, 3, PublishCommand(pub("a", "m", "c", 1, 1))))
	r := published(t, s, entry(t, 5, PublishCommand(pub("a", "m", "c", 1, 1))))
	if !r[0].Duplicate || s.Applied() != 5 || s.log.LastMark() != 3 {
		t.Fatalf("result %+v, applied %d, last mark %d", r, s.Applied(), s.log.LastMark())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, fsys, Options{})
	if s2.Applied() != 3 {
		t.Fatalf("reopened at applied %d, want the last mark 3", s2.Applied())
	}
	if again := published(t, s2, entry(t, 5, PublishCommand(pub("a", "m", "c", 1, 1)))); again[0] != r[0] {
		t.Fatalf("entry 5 given again: %+v, first time %+v", again, r)
	}
}

// TestDeterminism: sequencers fed the same entries, in different Apply
// batches (as a leader and a follower may be), give the same results and
// hold byte-identical logs and equal dedup tables.
func TestDeterminism(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	opts := Options{Log: smallSegments, Horizon: 50}
	fa, fb := topiclog.NewMemFS(), topiclog.NewMemFS()
	a, b := open(t, fa, opts), open(t, fb, opts)
	r := rng(seed + 1)
	for range 60 {
		es := w.next(t, 1+r.IntN(8))
		ra := apply(t, a, es...)
		var rb []Result
		for len(rb) < len(es) {
			k := len(rb) + 1 + r.IntN(len(es)-len(rb))
			rb = append(rb, apply(t, b, es[len(rb):k]...)...)
		}
		for i := range es {
			if fmt.Sprint(ra[i]) != fmt.Sprint(rb[i]) {
				t.Fatalf("entry %d: results differ:\n %+v\n %+v", es[i].Index, ra[i], rb[i])
			}
		}
		if a.Applied() != b.Applied() {
			t.Fatalf("applied %d, %d", a.Applied(), b.Applied())
		}
	}
	sameFiles(t, "a and b", files(t, fa), files(t, fb))
	if tableString(a.table) != tableString(b.table) {
		t.Fatalf("tables differ")
	}
	checkRebuild(t, a)
	st := a.Stats()
	t.Logf("%d records in %d segments, %d duplicates, %d dedup entries", st.Log.Records, st.Log.Segments, st.Duplicates, st.DedupEntries)
	if st.Duplicates == 0 || st.Log.FirstSeq == 1 || st.Log.Segments < 2 {
		t.Fatalf("the workload exercised too little: %+v", st)
	}
}

// TestBatchEntriesSameResults: appending a whole Apply call as one log
// batch (replicas 1) deduplicates exactly as one batch per entry, including
// entries that retry records staged earlier in the same call and a window
// (Horizon) smaller than the call. Retention is left out: it removes whole
// segments, which the two framings cut differently.
func TestBatchEntriesSameResults(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	w.noTicks = true
	a := open(t, topiclog.NewMemFS(), Options{Log: smallSegments, Horizon: 20})
	c := open(t, topiclog.NewMemFS(), Options{Log: smallSegments, Horizon: 20, BatchEntries: true})
	r := rng(seed + 1)
	dups := 0
	for range 60 {
		es := w.next(t, 1+r.IntN(12))
		ra, rc := apply(t, a, es...), apply(t, c, es...)
		for i := range es {
			if fmt.Sprint(ra[i]) != fmt.Sprint(rc[i]) {
				t.Fatalf("entry %d: results differ:\n %+v\n %+v", es[i].Index, ra[i], rc[i])
			}
			for _, p := range ra[i].Publishes {
				if p.Duplicate {
					dups++
				}
			}
		}
		if a.Applied() != c.Applied() || tableString(a.table) != tableString(c.table) {
			t.Fatalf("applied %d, %d or tables differ", a.Applied(), c.Applied())
		}
	}
	checkRebuild(t, c)
	if a.Stats().Log.Segments <= c.Stats().Log.Segments || dups == 0 {
		t.Fatalf("batching did not batch, or nothing was retried: %d vs %d segments, %d duplicates", a.Stats().Log.Segments, c.Stats().Log.Segments, dups)
	}
}

// TestDedupSurvivesCrash: a replica whose topic log lost its unsynced tail
// (a crash between appends and any snapshot) reopens, rebuilds the dedup
// table from its log, is given the entries after Applied() again and
// reaches the same results and the same log as a replica that never
// crashed; retries of everything are then duplicates on both.
func TestDedupSurvivesCrash(t *testing.T) {
	seed := testSeed(t)
	lost := 0
	for round := range 20 {
		w := newWorkload(seed + uint64(round))
		opts := Options{Log: topiclog.Options{SegmentBytes: 16 << 10, Sync: topiclog.SyncNone}, Horizon: 60}
		fref, fsys := topiclog.NewMemFS(), topiclog.NewMemFS()
		ref, s := open(t, fref, opts), open(t, fsys, opts)
		es := w.next(t, 80)
		want := apply(t, ref, es...)
		apply(t, s, es...)

		crashed := fsys.CrashClone(seed + uint64(round))
		r := open(t, crashed, opts)
		from := slices.IndexFunc(es, func(e Entry) bool { return e.Index > r.Applied() })
		if from < 0 {
			from = len(es)
		}
		lost += len(es) - from
		checkRebuild(t, r)
		got := apply(t, r, es[from:]...)
		for i := range got {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[from+i]) {
				t.Fatalf("round %d: entry %d given again after the crash: %+v, first time %+v", round, es[from+i].Index, got[i], want[from+i])
			}
		}
		sameFiles(t, fmt.Sprintf("round %d: crashed and reference", round), files(t, crashed), files(t, fref))
		if tableString(r.table) != tableString(ref.table) {
			t.Fatalf("round %d: tables differ after the crash", round)
		}
		// Retry the last publishes: each is a duplicate of what the
		// reference assigned.
		retry := PublishCommand(w.sent[len(w.sent)-5:]...)
		x, y := published(t, r, entry(t, w.index+1, retry)), published(t, ref, entry(t, w.index+1, retry))
		if fmt.Sprint(x) != fmt.Sprint(y) {
			t.Fatalf("round %d: retries after the crash %+v, reference %+v", round, x, y)
		}
		if round == 0 {
			t.Logf("retries after the crash: %+v", x)
		}
	}
	t.Logf("crashes lost %d of %d entries", lost, 20*80)
	if lost == 0 {
		t.Fatal("no crash lost anything: nothing was replayed")
	}
}

// TestTableSlotsWrap: the table's map holds its items' slots modulo 2^32;
// across the wrap (after 4 billion records in a group's life) lookups
// still find each key's newest entry and the invariants hold.
func TestTableSlotsWrap(t *testing.T) {
	tb := newTable()
	tb.base = 1<<32 - 1500 // as if that many items had come and gone
	for seq := uint64(1); seq <= 5000; seq++ {
		k := dedupKey{client: fmt.Sprint("c", seq%3), pid: uint16(1 + seq%100)}
		tb.insert(k, dedupEntry{nonce: seq, seq: seq, index: seq})
		if seq > 64 {
			tb.evict(seq - 64)
		}
		if e, ok := tb.lookup(k); !ok || e.seq != seq {
			t.Fatalf("after inserting seq %d for %v: lookup gives %+v, %v", seq, k, e, ok)
		}
	}
	if tb.base < 1<<32 {
		t.Fatalf("base %d: the test did not cross the wrap", tb.base)
	}
	checkTable(t, tb)
}

// TestDenseClients: a client holding many entries gets a dense index by
// packet id and loses it when its entries leave the window; lookups find
// each key's newest entry throughout, and the invariants hold at each
// change (checkTable).
func TestDenseClients(t *testing.T) {
	tb := newTable()
	const window = 3 * denseFrom
	var seq uint64
	put := func(client string, pid uint16) {
		seq++
		k := dedupKey{client: client, pid: pid}
		tb.insert(k, dedupEntry{nonce: seq, seq: seq, index: seq})
		if seq > window {
			tb.evict(seq - window)
		}
		if e, ok := tb.lookup(k); !ok || e.seq != seq {
			t.Fatalf("after inserting seq %d for %v: lookup gives %+v, %v", seq, k, e, ok)
		}
	}
	dense := func(client string) bool {
		c := tb.clients[client]
		return c != nil && c.dense != nil
	}
	// "big" cycles through 20,000 packet ids, "small" through 10.
	for i := range 2 * denseFrom {
		put("big", uint16(1+i%20000))
		put("small", uint16(1+i%10))
	}
	if !dense("big") || dense("small") {
		t.Fatalf("big dense %v, small dense %v: want only big", dense("big"), dense("small"))
	}
	checkTable(t, tb)
	// Old entries of big, looked up across the index.
	for pid := uint16(1); pid <= 20000; pid += 997 {
		if e, ok := tb.lookup(dedupKey{client: "big", pid: pid}); !ok || e.seq == 0 {
			t.Fatalf("big/%d: %+v, %v", pid, e, ok)
		}
	}
	// Others fill the window: big's entries leave it, and so does its index.
	for i := 0; dense("big"); i++ {
		if i > window {
			t.Fatal("big keeps its dense index with its entries gone")
		}
		put(fmt.Sprint("other", i%50), uint16(1+i%1000))
	}
	if c := tb.clients["big"]; c == nil || c.live == 0 || c.live >= denseUntil {
		t.Fatalf("big lost its dense index as %+v, want while it held 1 to %d entries", c, denseUntil-1)
	}
	checkTable(t, tb)
	for range window {
		put(fmt.Sprint("other", seq%50), uint16(1+seq%1000))
	}
	if _, ok := tb.clients["big"]; ok {
		t.Fatal("big still known after all its entries left")
	}
	checkTable(t, tb)
}
