package topiclog

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var writeSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite the fuzz seed corpora under testdata/fuzz from fuzzSeeds")

// fuzzSeeds returns valid inputs for the fuzz targets: a segment as a
// log's first file, and a snapshot stream.
func fuzzSeeds(t testing.TB) (segments, streams [][]byte) {
	mem := NewMemFS()
	l := openLog(t, mem, Options{SegmentBytes: MinSegmentBytes})
	for i := range 12 {
		e := entry(fmt.Sprint("t/", i%3), i+1)
		e.Retain = i%4 == 0
		if i == 5 {
			e.Payload = nil
		}
		appendOK(t, l, e)
	}
	for _, b := range segmentFiles(t, mem) {
		if bytes.HasPrefix(b[frameHeaderLen+6:], []byte{1, 0, 0, 0, 0, 0, 0, 0}) {
			segments = append(segments, b) // the first segment
		}
	}
	segments = append(segments, appendHeader(nil, &header{first: 1}))
	streams = append(streams, snapshotBytes(t, l))
	l.Close()
	return segments, streams
}

func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-fuzz-seeds to rewrite testdata/fuzz")
	}
	segments, streams := fuzzSeeds(t)
	write := func(target string, inputs [][]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, in := range inputs {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("FuzzSegment", segments)
	write("FuzzRestore", streams)
	var frames [][]byte
	for _, s := range segments {
		for off := 0; off < len(s); {
			_, n, err := parseFrame(s[off:])
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, s[off:off+n], s[off+frameHeaderLen:off+n]) // framed and bare
			off += n
		}
	}
	write("FuzzFrame", frames)
}

// FuzzFrame: the frame, record and header decoders never panic, and what
// they accept re-encodes to the same bytes. The input is tried both as a
// frame and as a bare body, so the fuzzer reaches the body decoders without
// having to forge checksums.
func FuzzFrame(f *testing.F) {
	segments, _ := fuzzSeeds(f)
	f.Add(segments[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		checkBody(t, b)
		if body, n, err := parseFrame(b); err == nil {
			if n != frameHeaderLen+len(body) {
				t.Fatalf("frame of %d bytes has a body of %d", n, len(body))
			}
			checkBody(t, body)
		}
	})
}

func checkBody(t *testing.T, body []byte) {
	var again []byte
	if r, err := parseRecord(body); err == nil {
		again = appendRecord(nil, &r)
	} else if h, err := parseHeader(body); err == nil {
		again = appendHeader(nil, &h)
	} else {
		return
	}
	if !bytes.Equal(again[frameHeaderLen:], body) {
		t.Fatalf("body %x re-encodes to %x", body, again[frameHeaderLen:])
	}
}

// FuzzSegment opens a log whose only segment file holds the input. Open
// must not panic; if it succeeds, every record it kept must read back, the
// file must now hold exactly the re-encoding of the header and those
// records, and a second Open must find nothing to repair.
func FuzzSegment(f *testing.F) {
	segments, _ := fuzzSeeds(f)
	for _, s := range segments {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := NewMemFS()
		if err := mem.MkdirAll("g"); err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteFile("g/"+segName(1), b); err != nil {
			t.Fatal(err)
		}
		l, err := Open(mem, "g", Options{})
		if err != nil {
			return
		}
		defer l.Close()
		recs, err := l.ReadSeq(1, 1<<20, 0)
		if err != nil {
			t.Fatalf("open accepted the segment but reading it fails: %v", err)
		}
		if uint64(len(recs)) != l.NextSeq()-1 {
			t.Fatalf("read %d records, log holds %d", len(recs), l.NextSeq()-1)
		}
		// The file now holds the header and exactly the records read,
		// ending with a batch end.
		got, _ := mem.ReadFile("g/" + segName(1))
		_, off, err := parseFrame(got)
		if err != nil {
			t.Fatalf("recovered header: %v", err)
		}
		want := appendHeader(nil, &header{first: 1})
		end := true
		for _, r := range recs {
			body, n, err := parseFrame(got[off:])
			if err != nil {
				t.Fatalf("recovered file: %v", err)
			}
			rc, _ := parseRecord(body)
			end = rc.end
			want = appendRecord(want, &rec{seq: r.Seq, index: r.Index, mark: r.Mark, time: r.Time.UnixNano(), retain: r.Retain, end: rc.end, topic: []byte(r.Topic), payload: r.Payload})
			off += n
		}
		if !bytes.Equal(got, want) || !end {
			t.Fatalf("recovered file is not the re-encoding of what it holds, or ends inside a batch")
		}
		l.Close()
		l2, err := Open(mem, "g", Options{})
		if err != nil || l2.Recovery().TornTails != 0 || l2.NextSeq() != l.NextSeq() {
			t.Fatalf("second open: %v %+v", err, l2.Recovery())
		}
		l2.Close()
	})
}

// FuzzRestore restores a log from the input. It must not panic; a refused
// stream leaves the log as it was, and an accepted one survives a reopen.
func FuzzRestore(f *testing.F) {
	_, streams := fuzzSeeds(f)
	for _, s := range streams {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := NewMemFS()
		l := openLog(t, mem, Options{})
		m := newModel()
		e := entry("before", 1)
		appendOK(t, l, e)
		m.add(e)
		if err := l.Restore(bytes.NewReader(b)); err != nil {
			checkAll(t, l, m)
			l.Close()
			return
		}
		next, first := l.NextSeq(), l.FirstSeq()
		l.Close()
		l2, err := Open(mem, "g", Options{})
		if err != nil || l2.NextSeq() != next || l2.FirstSeq() != first || l2.Recovery().TornTails != 0 {
			t.Fatalf("reopen after restore: %v", err)
		}
		l2.Close()
	})
}
