package topiclog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// snapLog returns a log of n records of three topics in small segments.
func snapLog(t *testing.T, mem *MemFS, n int, tag string) (*Log, *model) {
	t.Helper()
	l := openLog(t, mem, Options{SegmentBytes: MinSegmentBytes})
	m := newModel()
	for i := range n {
		e := entry(fmt.Sprint("t/", i%3), i+1)
		e.Payload = fmt.Appendf(nil, "%s-%d-%s", tag, i, bytes.Repeat([]byte{'s'}, 60))
		e.Retain = i%5 == 0
		appendOK(t, l, e)
		m.add(e)
	}
	return l, m
}

func snapshotBytes(t testing.TB, l *Log) []byte {
	t.Helper()
	s, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var buf bytes.Buffer
	n, err := s.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v (wrote %d)", n, err, buf.Len())
	}
	return buf.Bytes()
}

// A snapshot is a point in time: appends and retention after it change
// neither what it writes nor its files.
func TestSnapshotIsAPointInTime(t *testing.T) {
	src, m := snapLog(t, NewMemFS(), 60, "a")
	defer src.Close()
	s, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s.NextSeq() != m.next() || s.LastMark() != m.lastMark() {
		t.Fatalf("snapshot at %d mark %d, want %d %d", s.NextSeq(), s.LastMark(), m.next(), m.lastMark())
	}
	for i := range 30 {
		appendOK(t, src, entry("t/9", 100+i))
	}
	if rm, err := src.ApplyRetention(Retention{MaxBytes: 1}, epoch); err != nil || rm.Segments == 0 {
		t.Fatalf("retention %+v %v", rm, err)
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo after retention deleted its files: %v", err)
	}
	s.Release()
	s.Release()
	if _, err := s.WriteTo(&buf); !errors.Is(err, ErrClosed) {
		t.Fatalf("WriteTo after Release: %v", err)
	}
	dst := openLog(t, NewMemFS(), Options{SegmentBytes: MinSegmentBytes})
	defer dst.Close()
	if err := dst.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	checkAll(t, dst, m)
}

// A damaged or cut stream is refused with ErrCorrupt and leaves the log as
// it was, with no staging files behind.
func TestRestoreRefusesADamagedStream(t *testing.T) {
	src, _ := snapLog(t, NewMemFS(), 40, "src")
	good := snapshotBytes(t, src)
	src.Close()
	cases := map[string]func([]byte) []byte{
		"empty":         func(b []byte) []byte { return nil },
		"magic":         func(b []byte) []byte { b[0] = 'X'; return b },
		"no segments":   func(b []byte) []byte { return append(b[:9:9], 0, 0, 0, 0) },
		"cut":           func(b []byte) []byte { return b[:len(b)/2] },
		"cut checksum":  func(b []byte) []byte { return b[:len(b)-1] },
		"flipped byte":  func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		"huge segment":  func(b []byte) []byte { b[13+8+7] = 0xff; return b },
		"stale segment": func(b []byte) []byte { return append(b[:len(b)-4], 1, 2, 3, 4) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			mem := NewMemFS()
			l, m := snapLog(t, mem, 20, "dst")
			defer l.Close()
			before := segmentFiles(t, mem)
			err := l.Restore(bytes.NewReader(damage(bytes.Clone(good))))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("restore = %v, want ErrCorrupt", err)
			}
			checkAll(t, l, m)
			names, _ := mem.List("g")
			if len(names) != len(before) {
				t.Fatalf("files after a refused restore: %v", names)
			}
			appendOK(t, l, entry("t/0", 1000)) // still writable
		})
	}
}

// A stream whose segments are well framed but whose records are not a
// valid log (here: a segment cut short inside a record, with a checksum
// over the cut bytes) is refused too: Restore accepts no torn tail.
func TestRestoreRefusesATornSegment(t *testing.T) {
	src, _ := snapLog(t, NewMemFS(), 10, "src")
	s, _ := src.Snapshot()
	var buf bytes.Buffer
	buf.Write(snapMagic[:])
	buf.WriteByte(snapVersion)
	buf.Write([]byte{1, 0, 0, 0})
	seg := s.segs[len(s.segs)-1]
	data := make([]byte, seg.size-3)
	if _, err := seg.seg.file.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	s.Release()
	buf.Write(binaryLE64(seg.seg.first))
	buf.Write(binaryLE64(uint64(len(data))))
	buf.Write(data)
	buf.Write(binaryLE32(crc32c(data)))
	dst := openLog(t, NewMemFS(), Options{})
	defer dst.Close()
	if err := dst.Restore(&buf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restore = %v, want ErrCorrupt", err)
	}
}

// TestRestoreCrashPoints crashes a Restore before each of its mutating
// file operations: Open afterwards finds the old log or the new one, whole.
func TestRestoreCrashPoints(t *testing.T) {
	srcLog, newM := snapLog(t, NewMemFS(), 50, "new")
	stream := snapshotBytes(t, srcLog)
	srcLog.Close()
	finished := 0
	for at := 0; ; at++ {
		mem := NewMemFS()
		l, oldM := snapLog(t, mem, 35, "old")
		count := 0
		armed := false
		var clone *MemFS
		efs := &ErrorFS{FS: mem, Inject: func(op Op, name string) error {
			if armed && mutating[op] {
				if count == at {
					clone = mem.CrashClone(uint64(at))
				}
				count++
			}
			return nil
		}}
		l.Close()
		l = openLog(t, efs, Options{SegmentBytes: MinSegmentBytes})
		armed = true // count the restore's operations only
		if err := l.Restore(bytes.NewReader(stream)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		if clone == nil {
			t.Logf("%d crash points, %d of them after the commit point", at, finished)
			break
		}
		got := openLog(t, clone, Options{SegmentBytes: MinSegmentBytes})
		want := oldM
		if got.NextSeq() == newM.next() {
			want = newM
		}
		if got.Recovery().RestoreFinished {
			finished++
		}
		checkAll(t, got, want)
		names, _ := clone.List("g")
		for _, n := range names {
			if _, ok := parseSegName(n); !ok {
				t.Fatalf("crash point %d: %s left behind", at, n)
			}
		}
		got.Close()
	}
	if finished == 0 {
		t.Error("no crash point fell after the commit point")
	}
}

func TestSnapshotOfAClosedLog(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{})
	l.Close()
	if _, err := l.Snapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("snapshot of a closed log: %v", err)
	}
	if err := l.Restore(bytes.NewReader(nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("restore into a closed log: %v", err)
	}
	if _, err := l.AppendBatch([]Entry{entry("a", 1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to a closed log: %v", err)
	}
	if _, err := l.Get("a", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("get from a closed log: %v", err)
	}
	if _, err := l.ApplyRetention(Retention{}, epoch); !errors.Is(err, ErrClosed) {
		t.Fatalf("retention on a closed log: %v", err)
	}
}
