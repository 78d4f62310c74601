package sequencer

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// logRead is ReadSeq without the records kept in memory: the log's answer.
func logRead(s *Sequencer, from uint64, maxRecords, maxBytes int) ([]Record, error) {
	recs, err := s.log.ReadSeq(from, maxRecords, maxBytes)
	if err != nil {
		return nil, err
	}
	return decodeRecords(recs)
}

// checkReads checks that ReadSeq answers exactly as the log does from the
// first positions and every one of the last 60 around what the log
// holds, under several limits, and
// that the memory kept stays within its limit and ends at the log's end.
func checkReads(t *testing.T, s *Sequencer) {
	t.Helper()
	first, next := s.FirstSeq(), s.NextSeq()
	for from := max(first, 2) - 1; from <= next+1; from++ {
		if from > first+2 && from+60 < next {
			from = next - 60
		}
		for _, lim := range [][2]int{{1, 0}, {4096, 0}, {4096, 100}, {3, 1000}} {
			got, gerr := s.ReadSeq(from, lim[0], lim[1])
			want, werr := logRead(s, from, lim[0], lim[1])
			if fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Fatalf("ReadSeq(%d, %d, %d): error %v, the log's %v", from, lim[0], lim[1], gerr, werr)
			}
			if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
				t.Fatalf("ReadSeq(%d, %d, %d):\n have %s\n the log %s", from, lim[0], lim[1], g, w)
			}
		}
	}
	c := &s.recent
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.bytes > c.limit || c.bytes < 0 {
		t.Fatalf("%d bytes kept, limit %d", c.bytes, c.limit)
	}
	if len(c.batches) > 0 && (c.batches[0].first < first || c.next() != next) {
		t.Fatalf("memory holds [%d, %d), the log [%d, %d)", c.batches[0].first, c.next(), first, next)
	}
}

// TestRecentReadsMatchLog: with a limit small enough that batches leave
// memory all the time, and retention ticks removing prefixes, every read
// is the log's, some answered from memory and some from the log.
func TestRecentReadsMatchLog(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	s := open(t, topiclog.NewMemFS(), Options{Log: smallSegments, RecentBytes: 4 << 10})
	ticks := 0
	for range 40 {
		entries := w.next(t, 5)
		for _, res := range apply(t, s, entries...) {
			if res.Removed.Segments > 0 {
				ticks++
			}
		}
		checkReads(t, s)
	}
	st := s.Stats().Recent
	if st.Hits == 0 || st.Misses == 0 || st.Records == 0 || ticks == 0 {
		t.Fatalf("recent %+v after %d ticks that removed segments: want hits, misses and removals", st, ticks)
	}
}

// TestRecentBatchEntries: with several entries per batch (a group without
// replicas) the kept records are the log's too.
func TestRecentBatchEntries(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	s := open(t, topiclog.NewMemFS(), Options{Log: smallSegments, BatchEntries: true, RecentBytes: 16 << 10})
	for range 20 {
		apply(t, s, w.next(t, 8)...)
		checkReads(t, s)
	}
	if st := s.Stats().Recent; st.Hits == 0 {
		t.Fatalf("recent %+v: no read answered from memory", st)
	}
}

// TestRecentRetentionRemovesKept: a tick that removes records kept in
// memory removes them from reads.
func TestRecentRetentionRemovesKept(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{Log: smallSegments, RecentBytes: 1 << 20})
	index := uint64(0)
	for i := range 120 {
		index++
		apply(t, s, entry(t, index, PublishCommand(pub("a", fmt.Sprintf("message %03d", i), "c", uint16(1+i), uint64(i)))))
		if _, err := s.ReadSeq(s.NextSeq(), 1, 0); err != nil { // a feed waiting at the end
			t.Fatal(err)
		}
	}
	if st := s.Stats().Recent; st.Records != 120 {
		t.Fatalf("%d records kept, want all 120", st.Records)
	}
	index++
	tick := apply(t, s, entry(t, index, RetentionCommand(topiclog.Retention{MaxRecordsPerTopic: 30})))[0]
	if tick.Err != nil || tick.Removed.FirstSeq <= 1 {
		t.Fatalf("tick: %+v", tick)
	}
	var ce *topiclog.CompactedError
	if _, err := s.ReadSeq(1, 10, 0); !errors.As(err, &ce) || ce.First != s.FirstSeq() {
		t.Fatalf("read of a removed position: %v", err)
	}
	if st := s.Stats().Recent; st.Records != int(s.NextSeq()-s.FirstSeq()) {
		t.Fatalf("%d records kept, the log holds [%d, %d)", st.Records, s.FirstSeq(), s.NextSeq())
	}
	checkReads(t, s)
}

// TestRecentRestoreReplaces: a restored snapshot replaces what memory
// held, even where the old state had other records at the same positions.
func TestRecentRestoreReplaces(t *testing.T) {
	seed := testSeed(t)
	opts := Options{Log: smallSegments, Horizon: 50}
	a := open(t, topiclog.NewMemFS(), opts)
	apply(t, a, newWorkload(seed).next(t, 60)...)
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	b := open(t, topiclog.NewMemFS(), opts)
	other := newWorkload(seed + 1)
	other.noTicks = true
	apply(t, b, other.next(t, 20)...)
	if _, err := b.ReadSeq(1, 10, 0); err != nil || b.Stats().Recent.Records == 0 {
		t.Fatalf("before restore: %v, %+v", err, b.Stats().Recent)
	}
	if err := b.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats().Recent; st.Records != 0 || st.Bytes != 0 {
		t.Fatalf("after restore memory holds %+v", st)
	}
	checkReads(t, b)
	// Records applied after the restore are kept again, and match.
	more := newWorkload(seed)
	more.next(t, 60)
	apply(t, b, more.next(t, 10)...)
	checkReads(t, b)
}

// TestRecentClose: a closed sequencer serves nothing from memory.
func TestRecentClose(t *testing.T) {
	s, err := Open(topiclog.NewMemFS(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, entry(t, 1, PublishCommand(pub("a", "m", "c", 1, 1))))
	if recs, err := s.ReadSeq(1, 10, 0); err != nil || len(recs) != 1 || s.Stats().Recent.Hits != 1 {
		t.Fatalf("read before close: %d records, %v, %+v", len(recs), err, s.Stats().Recent)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.ReadSeq(1, 10, 0); err == nil {
		t.Fatalf("read after close: %d records, no error", len(recs))
	}
}

// TestRecentDisabled: a negative limit keeps nothing.
func TestRecentDisabled(t *testing.T) {
	s := open(t, topiclog.NewMemFS(), Options{RecentBytes: -1})
	apply(t, s, entry(t, 1, PublishCommand(pub("a", "m", "c", 1, 1))))
	checkReads(t, s)
	if st := s.Stats().Recent; st.Hits != 0 || st.Records != 0 || st.Misses == 0 {
		t.Fatalf("recent %+v with memory off", st)
	}
}

// TestRecentIdleStops: a replica nobody reads from stops keeping records,
// and keeps them again, matching the log, once read.
func TestRecentIdleStops(t *testing.T) {
	seed := testSeed(t)
	w := newWorkload(seed)
	w.noTicks = true
	s := open(t, topiclog.NewMemFS(), Options{Log: smallSegments})
	for range recentIdleBatches + 5 {
		apply(t, s, w.next(t, 1)...)
	}
	if st := s.Stats().Recent; st.Records != 0 || st.Bytes != 0 {
		t.Fatalf("unread for %d batches, memory holds %+v", recentIdleBatches+5, st)
	}
	checkReads(t, s) // reads: from now on it keeps batches again
	apply(t, s, w.next(t, 3)...)
	if st := s.Stats().Recent; st.Records == 0 {
		t.Fatalf("read again, memory holds %+v", st)
	}
	checkReads(t, s)
	if st := s.Stats().Recent; st.Hits == 0 {
		t.Fatalf("recent %+v: no read answered from memory after reads resumed", st)
	}
}
