package sequencer

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// TestHandoverMakesEqualLogs: a snapshot taken while publishes go on, then
// the records appended since, give the new replica the old one's records
// (positions, indexes, times, marks, payloads) and, once reopened, its
// dedup decisions.
func TestHandoverMakesEqualLogs(t *testing.T) {
	src := open(t, topiclog.NewMemFS(), Options{BatchEntries: true, Log: smallSegments})
	idx := uint64(0)
	publish := func(n int) {
		for range n {
			idx++
			apply(t, src, entry(t, idx, PublishCommand(pub(fmt.Sprintf("t/%d", idx%3), "m", "c", uint16(idx%500+1), idx))))
		}
	}
	publish(200)
	sn, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sn.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	publish(150) // after the snapshot: the tail

	dstFS := topiclog.NewMemFS()
	dst := open(t, dstFS, Options{BatchEntries: true, Log: smallSegments})
	if err := dst.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	tail, err := src.ReadRaw(dst.NextSeq(), 1<<20, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(tail) != 150 {
		t.Fatalf("tail of %d records, want 150", len(tail))
	}
	if err := dst.AppendRaw(tail[1:]); err == nil {
		t.Fatal("records not starting at the log's next position were taken")
	}
	if err := dst.AppendRaw(tail); err != nil {
		t.Fatal(err)
	}
	if dst.Applied() != src.Applied() {
		t.Errorf("applied %d, source %d", dst.Applied(), src.Applied())
	}
	a, _ := src.ReadRaw(1, 1<<20, 64<<20)
	b, _ := dst.ReadRaw(1, 1<<20, 64<<20)
	if len(a) != len(b) {
		t.Fatalf("%d records, source %d", len(b), len(a))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Seq != y.Seq || x.Index != y.Index || x.Topic != y.Topic || !x.Time.Equal(y.Time) || x.Mark != y.Mark || !bytes.Equal(x.Payload, y.Payload) {
			t.Fatalf("record %d differs: %+v vs %+v", i, x, y)
		}
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := Open(dstFS, dir, Options{BatchEntries: true, Log: smallSegments})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	// A retry of the last publish is recognised by the reopened replica.
	res := apply(t, re, entry(t, idx+1, PublishCommand(pub(fmt.Sprintf("t/%d", idx%3), "m", "c", uint16(idx%500+1), idx))))
	if len(res[0].Publishes) != 1 || !res[0].Publishes[0].Duplicate {
		t.Errorf("retry after the handover: %+v, want a duplicate", res[0].Publishes)
	}
}
