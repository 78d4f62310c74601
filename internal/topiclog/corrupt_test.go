package topiclog

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"testing"
)

// damagedLog writes 30 records of two topics in 1 KiB segments, closes
// the log and returns its filesystem, model and segment names (sorted).
func damagedLog(t *testing.T) (*MemFS, *model, []string) {
	t.Helper()
	mem := NewMemFS()
	l := openLog(t, mem, Options{SegmentBytes: MinSegmentBytes})
	m := newModel()
	for i := range 30 {
		e := entry(fmt.Sprint("t/", i%2), i+1)
		e.Payload = bytes.Repeat([]byte{'x'}, 90)
		appendOK(t, l, e)
		m.add(e)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range segmentFiles(t, mem) {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 3 {
		t.Fatalf("want at least 3 segments, got %d", len(names))
	}
	return mem, m, names
}

func edit(t *testing.T, mem *MemFS, name string, f func([]byte) []byte) {
	t.Helper()
	b, err := mem.ReadFile("g/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteFile("g/"+name, f(b)); err != nil {
		t.Fatal(err)
	}
}

// recordOffsets returns the offsets of the records of a segment file.
func recordOffsets(t *testing.T, b []byte) []int {
	t.Helper()
	var offs []int
	_, n, err := parseFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	for off := n; off < len(b); {
		_, n, err := parseFrame(b[off:])
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
		off += n
	}
	return offs
}

func TestRecoveryTruncatesGarbageAfterTheLastRecord(t *testing.T) {
	mem, m, names := damagedLog(t)
	last := names[len(names)-1]
	edit(t, mem, last, func(b []byte) []byte { return append(b, 0x13, 0x37, 0, 0, 0, 0, 0, 0, 0, 0, 9) })
	l := openLog(t, mem, Options{SegmentBytes: MinSegmentBytes})
	defer l.Close()
	if rec := l.Recovery(); rec.TornTails != 1 || rec.TruncatedBytes != 11 {
		t.Fatalf("recovery %+v, want one torn tail of 11 bytes", rec)
	}
	checkAll(t, l, m)
}

func TestRecoveryTruncatesATornLastRecord(t *testing.T) {
	mem, m, names := damagedLog(t)
	last := names[len(names)-1]
	edit(t, mem, last, func(b []byte) []byte { return b[:len(b)-7] })
	l := openLog(t, mem, Options{SegmentBytes: MinSegmentBytes})
	defer l.Close()
	if rec := l.Recovery(); rec.TornTails != 1 {
		t.Fatalf("recovery %+v, want one torn tail", rec)
	}
	m.truncate(m.next() - 1)
	checkAll(t, l, m)
	// The truncation is durable: a crash right after Open keeps it.
	l2 := openLog(t, mem.CrashClone(1), Options{SegmentBytes: MinSegmentBytes})
	defer l2.Close()
	checkAll(t, l2, m)
}

func TestRecoveryRefusesDamageFollowedByValidRecords(t *testing.T) {
	mem, _, names := damagedLog(t)
	last := names[len(names)-1]
	edit(t, mem, last, func(b []byte) []byte {
		offs := recordOffsets(t, b)
		if len(offs) < 2 {
			t.Fatalf("last segment holds %d records", len(offs))
		}
		b[offs[0]+frameHeaderLen+40] ^= 0xff // the first record's payload
		return b
	})
	_, err := Open(mem, "g", Options{SegmentBytes: MinSegmentBytes})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}

func TestRecoveryRefusesDamageInAnEarlierSegment(t *testing.T) {
	for _, what := range []string{"payload", "length", "truncated", "garbage after"} {
		t.Run(what, func(t *testing.T) {
			mem, _, names := damagedLog(t)
			edit(t, mem, names[1], func(b []byte) []byte {
				offs := recordOffsets(t, b)
				switch what {
				case "payload":
					b[len(b)-1] ^= 1
				case "length":
					b[offs[len(offs)-1]] ^= 0x40
				case "truncated":
					b = b[:len(b)-1]
				default:
					b = append(b, 0)
				}
				return b
			})
			_, err := Open(mem, "g", Options{SegmentBytes: MinSegmentBytes})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestRecoveryRefusesAMissingSegment(t *testing.T) {
	mem, _, names := damagedLog(t)
	if err := mem.Remove("g/" + names[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem, "g", Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}

func TestRecoveryRefusesAHeaderThatDisagrees(t *testing.T) {
	mem, _, names := damagedLog(t)
	edit(t, mem, names[2], func(b []byte) []byte {
		body, n, err := parseFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseHeader(body)
		if err != nil {
			t.Fatal(err)
		}
		h.topics[0].last++
		return append(appendHeader(nil, &h), b[n:]...)
	})
	if _, err := Open(mem, "g", Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}

// A crash while a new segment was being created leaves its file empty or
// with a torn header: Open rewrites the header from the earlier segments.
func TestRecoveryRewritesATornHeader(t *testing.T) {
	for _, keep := range []int{0, 5} {
		t.Run(fmt.Sprint("keep ", keep), func(t *testing.T) {
			mem, m, names := damagedLog(t)
			last := names[len(names)-1]
			first, _ := parseSegName(last)
			m.truncate(first)
			edit(t, mem, last, func(b []byte) []byte { return b[:keep] })
			l := openLog(t, mem, Options{SegmentBytes: MinSegmentBytes})
			if rec := l.Recovery(); rec.TornTails != 1 {
				t.Fatalf("recovery %+v", rec)
			}
			checkAll(t, l, m)
			e := entry("t/1", 99)
			appendOK(t, l, e)
			m.add(e)
			checkAll(t, l, m)
			l.Close()
			l = openLog(t, mem, Options{SegmentBytes: MinSegmentBytes})
			defer l.Close()
			checkAll(t, l, m)
		})
	}
}

func TestRecoveryOfTheFirstSegmentHeader(t *testing.T) {
	mem := NewMemFS()
	l := openLog(t, mem, Options{})
	l.Close()
	edit(t, mem, segName(1), func(b []byte) []byte { return b[:3] })
	l = openLog(t, mem, Options{})
	appendOK(t, l, entry("a", 1))
	if r, err := l.Get("a", 1); err != nil || r.Seq != 1 {
		t.Fatalf("get: %v %v", describe(r), err)
	}
	l.Close()

	// A first segment that does not start at 1 has lost its topic table
	// with its header: nothing can rebuild it.
	mem, _, names := damagedLog(t)
	for _, n := range names[:len(names)-1] {
		if err := mem.Remove("g/" + n); err != nil {
			t.Fatal(err)
		}
	}
	edit(t, mem, names[len(names)-1], func(b []byte) []byte { return b[:3] })
	if _, err := Open(mem, "g", Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}

// A checksum that holds over wrong contents is not a torn write.
func TestRecoveryRefusesAValidFrameWithWrongContents(t *testing.T) {
	mem, _, names := damagedLog(t)
	last := names[len(names)-1]
	edit(t, mem, last, func(b []byte) []byte {
		offs := recordOffsets(t, b)
		r, err := parseRecord(b[offs[len(offs)-1]+frameHeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		r.index += 5
		return appendRecord(b[:offs[len(offs)-1]], &r)
	})
	if _, err := Open(mem, "g", Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}

func TestReadsDetectDamageAfterOpen(t *testing.T) {
	mem, _, names := damagedLog(t)
	l := openLog(t, mem, Options{})
	defer l.Close()
	edit(t, mem, names[0], func(b []byte) []byte {
		b[len(b)-1] ^= 1
		return b
	})
	if _, err := l.ReadSeq(1, 100, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read = %v, want ErrCorrupt", err)
	}
}

func TestOpenIgnoresUnknownFiles(t *testing.T) {
	mem, m, _ := damagedLog(t)
	if err := mem.WriteFile("g/notes.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, mem, Options{})
	defer l.Close()
	checkAll(t, l, m)
}

// A batch whose last record is missing is dropped whole, even when every
// frame before the cut is intact: a batch is all or nothing after a crash.
func TestRecoveryDropsAnIncompleteBatch(t *testing.T) {
	mem := NewMemFS()
	l := openLog(t, mem, Options{})
	m := newModel()
	first := []Entry{entry("a", 1), entry("b", 2)}
	appendOK(t, l, first...)
	m.addBatch(first...)
	appendOK(t, l, entry("a", 3), entry("b", 4), entry("a", 5))
	l.Close()
	edit(t, mem, segName(1), func(b []byte) []byte {
		offs := recordOffsets(t, b)
		return b[:offs[len(offs)-1]] // cut the batch's last record cleanly
	})
	l = openLog(t, mem, Options{})
	defer l.Close()
	if rec := l.Recovery(); rec.TornTails != 1 {
		t.Fatalf("recovery %+v, want one torn tail", rec)
	}
	checkAll(t, l, m)
}

// Batches never span segments, so a sealed segment that ends inside one
// is damage, not a torn write.
func TestRecoveryRefusesASealedSegmentEndingInsideABatch(t *testing.T) {
	mem, _, names := damagedLog(t)
	edit(t, mem, names[0], func(b []byte) []byte {
		offs := recordOffsets(t, b)
		lastOff := offs[len(offs)-1]
		r, err := parseRecord(b[lastOff+frameHeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		r.end = false
		return appendRecord(b[:lastOff], &r)
	})
	if _, err := Open(mem, "g", Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}
