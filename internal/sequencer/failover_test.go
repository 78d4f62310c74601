package sequencer

import (
	"fmt"
	"testing"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// replicas are sequencers fed the same committed entries, as a group's
// replicas are. log is the Raft log and results what each entry gave, to
// replay after a crash and check the replay.
type replicas struct {
	t       *testing.T
	opts    Options
	fss     []*topiclog.MemFS
	seqs    []*Sequencer
	log     []Entry
	results map[uint64]string
}

func newReplicas(t *testing.T, n int, opts Options) *replicas {
	r := &replicas{t: t, opts: opts, results: map[uint64]string{}}
	for range n {
		fs := topiclog.NewMemFS()
		r.fss = append(r.fss, fs)
		r.seqs = append(r.seqs, open(t, fs, opts))
	}
	return r
}

// commit applies entries on every replica and checks that they agree.
func (r *replicas) commit(es ...Entry) []Result {
	r.t.Helper()
	r.log = append(r.log, es...)
	var out [][]Result
	for _, s := range r.seqs {
		out = append(out, apply(r.t, s, es...))
	}
	for i, e := range es {
		r.results[e.Index] = fmt.Sprint(out[0][i])
		for k := 1; k < len(out); k++ {
			if fmt.Sprint(out[k][i]) != r.results[e.Index] {
				r.t.Fatalf("replica %d disagrees on entry %d: %+v vs %+v", k, e.Index, out[k][i], out[0][i])
			}
		}
	}
	return out[0]
}

// crash replaces replica k by what a crash leaves of it, reopened, and
// gives it again the entries after its Applied() from the Raft log (no
// snapshot), which must give what they gave the first time. It returns how
// many entries were given again.
func (r *replicas) crash(k int, seed uint64) int {
	r.t.Helper()
	crashed := r.fss[k].CrashClone(seed)
	_ = r.seqs[k].Close()
	r.fss[k] = crashed
	s := open(r.t, crashed, r.opts)
	r.seqs[k] = s
	checkRebuild(r.t, s)
	var again []Entry
	for _, e := range r.log {
		if e.Index > s.Applied() {
			again = append(again, e)
		}
	}
	for i, got := range apply(r.t, s, again...) {
		if fmt.Sprint(got) != r.results[again[i].Index] {
			r.t.Fatalf("replica %d, entry %d given again after a crash: %+v, first time %s", k, again[i].Index, got, r.results[again[i].Index])
		}
	}
	return len(again)
}

// same checks that every replica holds the same log and dedup table.
func (r *replicas) same() {
	r.t.Helper()
	for k := 1; k < len(r.seqs); k++ {
		sameFiles(r.t, fmt.Sprintf("replicas 0 and %d", k), files(r.t, r.fss[0]), files(r.t, r.fss[k]))
		if tableString(r.seqs[k].table) != tableString(r.seqs[0].table) {
			r.t.Fatalf("replica %d's dedup table differs", k)
		}
	}
}

// TestExactlyOnceAcrossFailover plays a failover at the state machine: the
// leader appends a QoS 2 publish and every replica applies it, but the
// answer never reaches the access node (the leader dies). The access node
// retries the same publish, same nonce, at the new leader, which proposes
// it in a new entry of a later term. Every replica, including one that
// crashed and restarted without a snapshot in between, answers with the
// original index and appends nothing; the logs stay identical.
func TestExactlyOnceAcrossFailover(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	// Segments large enough that a crash loses the unsynced tail.
	g := newReplicas(t, 3, Options{Log: topiclog.Options{SegmentBytes: 64 << 10, Sync: topiclog.SyncNone}})
	g.commit(w.next(t, 30)...)

	// Term 1: the leader appends the QoS 2 publish among others.
	p := Publish{Topic: "orders", Message: []byte("pay 10"), QoS: 2, Key: Key{Client: "shop", PacketID: 7, Nonce: 1 << 40}}
	w.index++
	orig := g.commit(entry(t, w.index, PublishCommand(pub("t/0", "x", "c0", 1, 1<<41), p)))[0].Publishes[1]
	g.commit(w.next(t, 20)...) // traffic goes on before the leader dies

	replayed := g.crash(2, seed)
	t.Logf("replica 2 restarted at applied %d, given %d entries again", g.seqs[2].Applied(), replayed)
	if replayed == 0 {
		t.Fatal("the crash lost nothing: nothing tested the rebuilt table")
	}
	g.commit(w.next(t, 5)...)

	// Term 2: the new leader proposes the access node's retry.
	w.index++
	retry := entry(t, w.index, PublishCommand(p, pub("t/1", "y", "c1", 2, 1<<42)))
	retry.Term = 2
	before := g.seqs[0].NextSeq()
	got := g.commit(retry)[0].Publishes
	if got[0] != (Published{Index: orig.Index, Seq: orig.Seq, Duplicate: true}) {
		t.Fatalf("retry after failover: %+v, original %+v", got[0], orig)
	}
	if g.seqs[0].NextSeq() != before+1 {
		t.Fatalf("the retry appended %d records, want only the other publish", g.seqs[0].NextSeq()-before)
	}
	rec, err := g.seqs[2].Get("orders", orig.Index)
	if err != nil || string(rec.Message) != "pay 10" || rec.QoS != 2 || rec.Key != p.Key || rec.Seq != orig.Seq {
		t.Fatalf("record at the original index: %+v, %v", rec, err)
	}
	if _, last, _ := g.seqs[2].Bounds("orders"); last != 1 {
		t.Fatalf("topic orders holds %d records, want exactly one", last)
	}
	// The retry's entry appended a record, so a crash now keeps it or
	// replays it; either way the answer stays.
	g.crash(1, seed+1)
	g.same()
}

// TestCrashesAtRandomPoints: replicas crash at seeded points of a workload
// with retries, packet-id reuse and retention ticks; after every restart
// they answer every entry given again as the first time, and all of them
// end with the same log and dedup table.
func TestCrashesAtRandomPoints(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	opts := Options{Log: topiclog.Options{SegmentBytes: 4 << 10, Sync: topiclog.SyncNone}, Horizon: 40}
	w.tick = topiclog.Retention{MaxRecordsPerTopic: 60}
	g := newReplicas(t, 3, opts)
	r := rng(seed)
	replayed := 0
	for round := range 40 {
		g.commit(w.next(t, 1+r.IntN(6))...)
		if r.IntN(4) == 0 {
			replayed += g.crash(r.IntN(3), seed+uint64(round))
		}
	}
	g.same()
	if replayed == 0 {
		t.Fatal("no crash lost anything: the test exercised no replay")
	}
	t.Logf("%d entries given again after crashes", replayed)
}

// TestHorizonBoundsTheWindow: a retry is recognised while fewer than
// Horizon records followed the original, and appended again after; the
// table never holds more than Horizon entries.
func TestHorizonBoundsTheWindow(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{Horizon: 10})
	p := pub("a", "m", "c", 1, 1)
	first := published(t, s, entry(t, 1, PublishCommand(p)))[0]
	index := uint64(1)
	for i := range 9 {
		index++
		published(t, s, entry(t, index, PublishCommand(pub("b", "x", "d", uint16(i+1), uint64(i)))))
	}
	index++
	if got := published(t, s, entry(t, index, PublishCommand(p)))[0]; got != (Published{Index: first.Index, Seq: first.Seq, Duplicate: true}) {
		t.Fatalf("retry 9 records after the original: %+v", got)
	}
	index++
	published(t, s, entry(t, index, PublishCommand(pub("b", "x", "d", 100, 100)))) // the 10th record after
	index++
	if got := published(t, s, entry(t, index, PublishCommand(p)))[0]; got.Duplicate || got.Seq != 12 {
		t.Fatalf("retry 10 records after the original: %+v, want appended again", got)
	}
	for i := range 50 {
		index++
		published(t, s, entry(t, index, PublishCommand(pub("b", "x", fmt.Sprint("e", i), 1, 1))))
		if n := s.Stats().DedupEntries; n > 10 {
			t.Fatalf("%d dedup entries with a horizon of 10", n)
		}
	}
	checkRebuild(t, s)
}

// TestForgottenClientReturns: a client whose records all left the window
// is forgotten by the table (its number with it), including when it was
// the client resolved last; when it publishes again, its retries are
// recognised, and the table holds at most one client per entry's record.
func TestForgottenClientReturns(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{Horizon: 3})
	q0 := Publish{Topic: "b", Message: []byte("q0")}
	// c's record leaves the window within its own entry.
	published(t, s, entry(t, 1, PublishCommand(pub("a", "m", "c", 1, 1), q0, q0, q0)))
	if _, ok := s.table.clients["c"]; ok {
		t.Fatal("client c still known with none of its records in the window")
	}
	p := pub("a", "m2", "c", 1, 2)
	first := published(t, s, entry(t, 2, PublishCommand(p)))[0]
	published(t, s, entry(t, 3, PublishCommand(pub("a", "x", "d", 1, 3))))
	if got := published(t, s, entry(t, 4, PublishCommand(p)))[0]; got != (Published{Index: first.Index, Seq: first.Seq, Duplicate: true}) {
		t.Fatalf("retry of a returning client: %+v, want the original %+v as a duplicate", got, first)
	}
	// Many clients, one record each: the table forgets those that left.
	index := uint64(4)
	for i := range 50 {
		index++
		published(t, s, entry(t, index, PublishCommand(pub("a", "y", fmt.Sprint("e", i), 1, uint64(10+i)))))
		if n := len(s.table.clients); n > 3 {
			t.Fatalf("%d clients known with a horizon of 3", n)
		}
	}
	checkRebuild(t, s)
}
