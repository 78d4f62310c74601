package topiclog

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// Logs fed the same batches hold byte-identical segments, whatever their
// sync policy, and across reopens.
func TestSameBatchesSameBytes(t *testing.T) {
	for _, seed := range seeds(11, 12) {
		rng := newRand(t, seed)
		var es []Entry
		for i := range 600 {
			e := entry(fmt.Sprint("t/", rng.IntN(5)), i)
			e.Time = epoch.Add(time.Duration(i*rng.IntN(3)) * time.Second)
			e.Payload = bytes.Repeat([]byte{byte(i)}, rng.IntN(400))
			e.Retain = rng.IntN(3) == 0
			es = append(es, e)
		}
		var cuts []int // batch boundaries, the same for every variant
		for i := 0; i < len(es); {
			i += min(len(es)-i, 1+rng.IntN(40))
			cuts = append(cuts, i)
		}
		var files []map[string][]byte
		for v, opts := range []Options{
			{SegmentBytes: 4 << 10, SegmentAge: time.Minute},
			{SegmentBytes: 4 << 10, SegmentAge: time.Minute, Sync: SyncNone},
			{SegmentBytes: 4 << 10, SegmentAge: time.Minute},
		} {
			mem := NewMemFS()
			l := openLog(t, mem, opts)
			from := 0
			for _, to := range cuts {
				appendOK(t, l, es[from:to]...)
				from = to
				if v == 2 && rng.IntN(10) == 0 {
					l.Close()
					l = openLog(t, mem, opts)
				}
			}
			l.Close()
			files = append(files, segmentFiles(t, mem))
		}
		if len(files[0]) < 5 {
			t.Fatalf("only %d segments", len(files[0]))
		}
		for v := 1; v < len(files); v++ {
			if len(files[v]) != len(files[0]) {
				t.Fatalf("variant %d has %d segments, want %d", v, len(files[v]), len(files[0]))
			}
			for name, b := range files[0] {
				if !bytes.Equal(files[v][name], b) {
					t.Fatalf("variant %d: %s differs", v, name)
				}
			}
		}
	}
}
