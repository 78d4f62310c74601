package topiclog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
)

// loader rebuilds a state from segment files: at Open (tolerating a torn
// tail in the last segment) and when Restore validates what it received
// (tolerating nothing).
type loader struct {
	fs           FS
	dir          string
	prefix       string // of the file names: "" or stagingPrefix
	tolerateTail bool
	log          *slog.Logger

	tornTails int
	truncated int64
}

// load reads the segments that start at firsts (any order) into a state.
// On error it closes every file it opened.
func (ld *loader) load(firsts []uint64) (st state, err error) {
	firsts = slices.Clone(firsts)
	slices.Sort(firsts)
	st.topics = map[string]*topicState{}
	defer func() {
		if err != nil {
			for _, s := range st.segs {
				s.release()
			}
			st = state{}
		}
	}()
	for i, first := range firsts {
		path := join(ld.dir, ld.prefix+segName(first))
		if i > 0 && first != st.next {
			return st, fmt.Errorf("%w: %s starts at %d, expected %d (a segment is missing)", ErrCorrupt, path, first, st.next)
		}
		f, err := ld.fs.Open(path)
		if err != nil {
			return st, err
		}
		seg := &segment{first: first, path: path, file: f, maxTime: math.MinInt64}
		seg.refs.Store(1)
		st.segs = append(st.segs, seg)
		if err := ld.scan(seg, &st, i == 0, i == len(firsts)-1); err != nil {
			return st, err
		}
		if i < len(firsts)-1 {
			seg.offs = slices.Clone(seg.offs) // sealed: exact size
		}
		st.bytes += seg.size
	}
	return st, nil
}

// scan verifies one segment and adds its records to st.
func (ld *loader) scan(seg *segment, st *state, first, last bool) error {
	size, err := seg.file.Size()
	if err != nil {
		return err
	}
	r := chunkReader{f: seg.file, size: size}
	body, n, err := r.frame(0)
	if err != nil {
		return ld.damaged(seg, &r, 0, err, st, first, last)
	}
	h, err := parseHeader(body)
	if err != nil || h.first != seg.first {
		return fmt.Errorf("%w: %s: bad segment header", ErrCorrupt, seg.path)
	}
	if first {
		st.next = h.first
		for _, t := range h.topics {
			st.topics[t.topic] = &topicState{name: t.topic, first: t.last + 1, last: t.last}
		}
	} else if !tableMatches(h.topics, st.topics) {
		return fmt.Errorf("%w: %s: header's topic table disagrees with the records before it", ErrCorrupt, seg.path)
	}
	off := int64(n)
	seg.size = off
	// A batch's records are checked as they come but applied only when its
	// last record (flagged) arrives: an incomplete batch at the end of the
	// last segment is a torn tail and leaves no trace.
	var b batchScan
	for off < size {
		body, n, err := r.frame(off)
		if err != nil {
			return ld.damaged(seg, &r, off, err, st, first, last)
		}
		rc, err := parseRecord(body)
		if err != nil {
			return fmt.Errorf("%w: %s at %d: bad record", ErrCorrupt, seg.path, off)
		}
		if want := st.next + uint64(len(b.recs)); rc.seq != want {
			return fmt.Errorf("%w: %s at %d: position %d, expected %d", ErrCorrupt, seg.path, off, rc.seq, want)
		}
		if err := b.add(st, &rc, off); err != nil {
			return fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, seg.path, off, err)
		}
		off += int64(n)
		if rc.end {
			b.commit(st, seg, off)
		}
	}
	if len(b.recs) > 0 {
		return ld.damaged(seg, &r, off, errTorn, st, first, last)
	}
	return nil
}

// batchScan holds the records of a batch being recovered until its end.
type batchScan struct {
	recs  []scanned
	lasts map[*topicState]uint64 // topics' last index, counting the batch
	added map[string]*topicState // topics the batch introduces
	// The topic of the previous record and its last index, kept out of
	// lasts while its run of records lasts (most batches are one run).
	cur     *topicState
	curLast uint64
}

type scanned struct {
	t      *topicState
	seq    uint64
	off    int64
	time   int64
	mark   uint64
	retain bool
}

func (b *batchScan) add(st *state, rc *rec, off int64) error {
	t := st.topics[string(rc.topic)]
	if t == nil {
		t = b.added[string(rc.topic)]
	}
	if t == nil {
		t = &topicState{name: string(rc.topic), first: 1}
		if b.added == nil {
			b.added = map[string]*topicState{}
		}
		b.added[t.name] = t
	}
	if t != b.cur {
		if b.cur != nil {
			if b.lasts == nil {
				b.lasts = map[*topicState]uint64{}
			}
			b.lasts[b.cur] = b.curLast
		}
		last, ok := b.lasts[t]
		if !ok {
			last = t.last
		}
		b.cur, b.curLast = t, last
	}
	if rc.index != b.curLast+1 {
		return fmt.Errorf("topic %q index %d, expected %d", t.name, rc.index, b.curLast+1)
	}
	b.curLast = rc.index
	b.recs = append(b.recs, scanned{t: t, seq: rc.seq, off: off, time: rc.time, mark: rc.mark, retain: rc.retain})
	return nil
}

// commit applies a complete batch, which ends at end.
func (b *batchScan) commit(st *state, seg *segment, end int64) {
	for name, t := range b.added {
		st.topics[name] = t
	}
	for _, r := range b.recs {
		r.t.last++
		r.t.seqs.push(r.seq)
		if r.retain {
			r.t.retained = r.seq
		}
		if len(seg.offs) == 0 {
			seg.firstTime = r.time
		}
		seg.maxTime = max(seg.maxTime, r.time)
		seg.offs = append(seg.offs, uint32(r.off))
		st.lastMark = r.mark
	}
	st.next += uint64(len(b.recs))
	st.records += uint64(len(b.recs))
	seg.size = end
	b.recs = b.recs[:0]
	b.cur = nil
	clear(b.lasts)
	clear(b.added)
}

func tableMatches(table []topicLast, topics map[string]*topicState) bool {
	if len(table) != len(topics) {
		return false
	}
	for _, e := range table {
		if t := topics[e.topic]; t == nil || t.last != e.last {
			return false
		}
	}
	return true
}

// damaged handles a segment that does not decode at off: a frame error
// (torn, or a bad length or checksum), or the end of the file inside a
// batch. At the end of the last segment that is what a crash leaves: the
// tail from the end of the last complete batch (or, if the header itself is
// damaged, the whole file) is truncated. Anything else is corruption: in an
// earlier segment (each is synced before the next is created), a frame whose
// checksum holds but whose contents are wrong, or a bad frame followed by a
// valid record (the damage is not at the end).
func (ld *loader) damaged(seg *segment, r *chunkReader, off int64, cause error, st *state, first, last bool) error {
	if !errors.Is(cause, errTorn) && !errors.Is(cause, errBadFrame) {
		return fmt.Errorf("topiclog: read %s: %w", seg.path, cause)
	}
	if !ld.tolerateTail || !last {
		return fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, seg.path, off, cause)
	}
	expect := st.next
	if off == 0 {
		expect = seg.first
	}
	later, err := r.recordAfter(off, expect)
	if err != nil {
		return fmt.Errorf("topiclog: read %s: %w", seg.path, err)
	}
	if later >= 0 {
		return fmt.Errorf("%w: %s at %d: %w, followed by a valid record at %d", ErrCorrupt, seg.path, off, cause, later)
	}
	cut := seg.size // the end of the last complete batch
	data := []byte(nil)
	if off == 0 {
		// The header itself is torn: the segment was being created.
		// Rewrite it, which needs the topic table: the state so far, or
		// an empty one for a log's very first segment.
		if first && seg.first != 1 {
			return fmt.Errorf("%w: %s: header damaged and no earlier segment to rebuild it from", ErrCorrupt, seg.path)
		}
		cut = 0
		data = appendHeader(nil, &header{first: seg.first, topics: topicTable(st.topics, nil)})
		if first {
			st.next = seg.first
		}
	}
	if err := seg.file.Truncate(cut); err != nil {
		return fmt.Errorf("topiclog: truncate %s: %w", seg.path, err)
	}
	if len(data) > 0 {
		if _, err := seg.file.WriteAt(data, 0); err != nil {
			return fmt.Errorf("topiclog: rewrite header of %s: %w", seg.path, err)
		}
	}
	if err := seg.file.Sync(); err != nil {
		return fmt.Errorf("topiclog: sync %s: %w", seg.path, err)
	}
	ld.tornTails++
	ld.truncated += r.size - cut
	ld.log.Warn("topiclog: truncating a torn tail", "file", seg.path, "offset", cut, "bytes", r.size-cut, "cause", cause.Error())
	seg.size = max(cut, int64(len(data)))
	return nil
}

// chunkReader reads frames from a file through a buffer of a megabyte or
// the frame's size.
type chunkReader struct {
	f      File
	size   int64
	buf    []byte
	bufOff int64
}

const readChunk = 1 << 20

// window returns up to n bytes at off (fewer at the end of the file).
func (r *chunkReader) window(off int64, n int) ([]byte, error) {
	n = int(min(int64(n), r.size-off))
	if off >= r.bufOff && off+int64(n) <= r.bufOff+int64(len(r.buf)) {
		return r.buf[off-r.bufOff:][:n], nil
	}
	want := int(min(max(int64(n), readChunk), r.size-off))
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	got, err := r.f.ReadAt(r.buf, off)
	if got < want {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF // the file shrank under us
		}
		r.buf = r.buf[:0]
		return nil, err
	}
	r.bufOff = off
	return r.buf[:n], nil
}

// frame returns the body and length of the frame at off. Frame errors are
// errTorn and errBadFrame; others are I/O errors.
func (r *chunkReader) frame(off int64) ([]byte, int, error) {
	b, err := r.window(off, frameHeaderLen)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < frameHeaderLen {
		return nil, 0, errTorn
	}
	length := binary.LittleEndian.Uint32(b)
	if length > maxBody {
		return nil, 0, errBadFrame
	}
	if off+frameHeaderLen+int64(length) > r.size {
		return nil, 0, errTorn
	}
	b, err = r.window(off, frameHeaderLen+int(length))
	if err != nil {
		return nil, 0, err
	}
	return parseFrame(b)
}

// recordAfter looks past damage at off for a valid record frame whose
// position is at least expect (so it was written after the damaged one) and
// returns its offset, or -1. Only the candidate frames whose kind byte and
// position look right are checksummed, so the search is cheap.
func (r *chunkReader) recordAfter(off int64, expect uint64) (int64, error) {
	for p := off + 1; p+frameHeaderLen+recordFixedLen+1 <= r.size; p++ {
		b, err := r.window(p, frameHeaderLen+9)
		if err != nil {
			return -1, err
		}
		if b[frameHeaderLen] != kindRecord {
			continue
		}
		seq := binary.LittleEndian.Uint64(b[frameHeaderLen+1:])
		if seq < expect || seq-expect > uint64(r.size) {
			continue
		}
		body, _, err := r.frame(p)
		if err != nil {
			if errors.Is(err, errTorn) || errors.Is(err, errBadFrame) {
				continue
			}
			return -1, err
		}
		if _, err := parseRecord(body); err == nil {
			return p, nil
		}
	}
	return -1, nil
}
