package topiclog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: the fixed default seeds)")

// seeds returns the seeds a randomized test runs with: -seed, or defaults.
func seeds(defaults ...uint64) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	return defaults
}

func newRand(t testing.TB, seed uint64) *rand.Rand {
	t.Helper()
	t.Logf("seed %d (reproduce with -run '%s' -seed %d)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func openLog(t testing.TB, fsys FS, opts Options) *Log {
	t.Helper()
	l, err := Open(fsys, "g", opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func entry(topic string, i int) Entry {
	return Entry{Topic: topic, Payload: fmt.Appendf(nil, "%s-%d", topic, i), Time: epoch.Add(time.Duration(i) * time.Second), Mark: uint64(i)}
}

func appendOK(t testing.TB, l *Log, es ...Entry) Appended {
	t.Helper()
	a, err := l.AppendBatch(es)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return a
}

func sameRecord(a, b Record) bool {
	return a.Seq == b.Seq && a.Topic == b.Topic && a.Index == b.Index && a.Time.Equal(b.Time) &&
		a.Mark == b.Mark && a.Retain == b.Retain && bytes.Equal(a.Payload, b.Payload)
}

func describe(r Record) string {
	return fmt.Sprintf("{seq %d %s#%d t=%d mark %d retain %v %q}", r.Seq, r.Topic, r.Index, r.Time.UnixNano(), r.Mark, r.Retain, r.Payload)
}

func compactedFirst(err error) (uint64, bool) {
	var ce *CompactedError
	if errors.As(err, &ce) && errors.Is(err, ErrCompacted) {
		return ce.First, true
	}
	return 0, false
}

// segmentFiles returns the contents of every segment file in the log's
// directory of a MemFS, by name.
func segmentFiles(t testing.TB, m *MemFS) map[string][]byte {
	t.Helper()
	names, err := m.List("g")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		if _, ok := parseSegName(n); !ok {
			continue
		}
		b, err := m.ReadFile("g/" + n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

func binaryLE64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func binaryLE32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func crc32c(b []byte) uint32     { return crc32.Checksum(b, castagnoli) }
