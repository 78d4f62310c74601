package topiclog

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// pendingTopic is a topic's state as a batch being written changes it.
type pendingTopic struct {
	t        *topicState // nil for a topic the batch introduces
	last     uint64
	retained uint64
	seqs     []uint64
}

// part is what a batch does to one segment: the active one (which receives
// the batch, or is only sealed) and, if the batch starts a segment, the new
// one.
type part struct {
	seg       *segment // nil for a new segment until it is created
	first     uint64   // a new segment's first position
	buf       []byte   // what to write: for a new segment, its header first
	hlen      int      // a new segment's header length
	base      int64    // file offset of buf[0]
	offs      []uint32 // file offsets of the part's records
	firstTime int64    // time of the part's first record
	maxTime   int64
}

// maxKeptBuf bounds the encoding buffer the writer keeps between batches.
const maxKeptBuf = 4 << 20

// AppendBatch appends entries as one batch and returns the positions and
// indexes it assigned. The batch goes into one segment with one write and,
// with SyncAlways, is made durable with one fsync before AppendBatch
// returns. A batch is atomic: readers see all of it or none of it, and after
// a crash the log holds all of it or none of it (its last record is marked,
// and recovery drops a batch whose end is missing). A Raft FSM that appends
// each committed entry (or each group of entries) as one batch therefore
// never finds an entry half applied.
//
// Where segments roll depends only on the sequence of batches (their sizes
// and times), so logs fed the same batches hold byte-identical segments.
//
// Invalid entries fail the whole batch with ErrInvalid before any I/O. An
// I/O error fails the whole batch, which is then absent from the log (on disk
// too, once the log has truncated what it wrote); if even that cannot be
// guaranteed (a failed fsync, a failed clean-up), the log refuses further
// writes with ErrFailed until reopened, and the failed batch may or may not
// be found, whole, by the recovery.
func (l *Log) AppendBatch(entries []Entry) (Appended, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w.closed {
		return Appended{}, ErrClosed
	}
	if l.w.failed != nil {
		return Appended{}, fmt.Errorf("topiclog: append: %w", l.w.failed)
	}
	times, total, err := validateBatch(entries)
	if err != nil {
		return Appended{}, err
	}
	st := &l.mu.state // the writer may read it without mu
	if len(entries) == 0 {
		return Appended{FirstSeq: st.next}, nil
	}
	parts, pending, idx, err := l.plan(entries, times, total)
	if err != nil {
		return Appended{}, err
	}
	if err := l.write(parts); err != nil {
		return Appended{}, err
	}
	first := st.next
	l.publish(parts, pending, uint64(len(entries)), entries[len(entries)-1].Mark)
	return Appended{FirstSeq: first, Indexes: idx}, nil
}

func validateBatch(entries []Entry) ([]int64, int64, error) {
	times := make([]int64, len(entries))
	total := 0
	for i := range entries {
		e := &entries[i]
		if len(e.Topic) == 0 || len(e.Topic) > MaxTopicLen {
			return nil, 0, fmt.Errorf("%w: topic of %d bytes (entry %d)", ErrInvalid, len(e.Topic), i)
		}
		t, ok := unixNanos(e.Time)
		if !ok {
			return nil, 0, fmt.Errorf("%w: time %v outside what the log stores (entry %d)", ErrInvalid, e.Time, i)
		}
		times[i] = t
		total += recordLen(e.Topic, e.Payload)
		if total > MaxBatchBytes {
			return nil, 0, fmt.Errorf("%w: batch over %d bytes", ErrInvalid, MaxBatchBytes)
		}
	}
	return times, int64(total), nil
}

// plan assigns positions and indexes and encodes the batch: into the
// active segment, or, if the batch would take a non-empty active segment
// past SegmentBytes or its first record is SegmentAge after the segment's,
// into a new segment (the active one is then sealed). A batch is never
// split, so it is one write, and recovery can treat it as a unit.
func (l *Log) plan(entries []Entry, times []int64, total int64) ([]*part, map[string]*pendingTopic, []uint64, error) {
	st := &l.mu.state
	active := st.segs[len(st.segs)-1]
	cur := &part{seg: active, base: active.size}
	parts := []*part{cur}
	size := active.size
	pending := make(map[string]*pendingTopic, 1)
	if len(active.offs) > 0 && (size+total > l.opts.SegmentBytes || reached(active.firstTime, times[0], l.opts.SegmentAge)) {
		hdr := appendHeader(l.w.buf[:0], &header{first: st.next, topics: topicTable(st.topics, nil)})
		if int64(len(hdr))+total > math.MaxUint32 {
			return nil, nil, nil, fmt.Errorf("%w: segment header of %d bytes", ErrInvalid, len(hdr))
		}
		cur = &part{first: st.next, buf: hdr, hlen: len(hdr)}
		parts = append(parts, cur)
		size = int64(len(hdr))
	} else {
		cur.buf = l.w.buf[:0]
	}
	idx := make([]uint64, len(entries))
	seq := st.next
	for i := range entries {
		e := &entries[i]
		p := pending[e.Topic]
		if p == nil {
			p = &pendingTopic{t: st.topics[e.Topic]}
			if p.t != nil {
				p.last = p.t.last
			}
			pending[e.Topic] = p
		}
		p.last++
		p.seqs = append(p.seqs, seq)
		if e.Retain {
			p.retained = seq
		}
		idx[i] = p.last
		start := len(cur.buf)
		cur.buf = appendRecord(cur.buf, &rec{seq: seq, index: p.last, mark: e.Mark, time: times[i], retain: e.Retain,
			end: i == len(entries)-1, topic: []byte(e.Topic), payload: e.Payload})
		cur.offs = append(cur.offs, uint32(size))
		if i == 0 {
			cur.firstTime, cur.maxTime = times[i], times[i]
		}
		cur.maxTime = max(cur.maxTime, times[i])
		size += int64(len(cur.buf) - start)
		seq++
	}
	if cap(cur.buf) <= maxKeptBuf {
		l.w.buf = cur.buf[:0] // keep the grown buffer for the next batch
	} else {
		l.w.buf = nil
	}
	return parts, pending, idx, nil
}

// reached reports whether t is d or more after from (false if d <= 0).
func reached(from, t int64, d time.Duration) bool {
	if d <= 0 || from > math.MaxInt64-int64(d) {
		return false
	}
	return t >= from+int64(d)
}

// write puts the parts on disk. On failure it undoes what it wrote and
// returns the error (marking the log failed if it could not undo).
func (l *Log) write(parts []*part) error {
	active := parts[0].seg
	var created []*segment
	var err error
	activeSyncFailed := false
	for i, p := range parts {
		sealing := i < len(parts)-1
		if p.seg == nil {
			var seg *segment
			seg, err = l.createSegment(p.first, p.buf, p.hlen)
			if seg != nil {
				created = append(created, seg)
			}
			if err != nil {
				err = fmt.Errorf("topiclog: create segment %d: %w", p.first, err)
				break
			}
			p.seg = seg
			continue
		}
		if len(p.buf) > 0 {
			if _, err = p.seg.file.WriteAt(p.buf, p.base); err != nil {
				err = fmt.Errorf("topiclog: write %s: %w", p.seg.path, err)
				break
			}
		}
		// A sealed segment is synced whatever the policy, so that only
		// the last segment can have a torn tail.
		if sealing || l.opts.Sync == SyncAlways {
			if err = p.seg.file.Sync(); err != nil {
				err = fmt.Errorf("topiclog: sync %s: %w", p.seg.path, err)
				activeSyncFailed = true
				break
			}
		}
	}
	if err == nil {
		return nil
	}
	if !l.undo(active, created) || activeSyncFailed {
		// After a failed fsync the kernel may have dropped the pages
		// it could not write, so nothing written since the last good
		// sync can be trusted to be on disk.
		l.w.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		return l.w.failed
	}
	return err
}

// undo removes the segments a failed batch created and truncates the active
// one to its published size, durably. It reports whether all of that worked.
func (l *Log) undo(active *segment, created []*segment) bool {
	ok := true
	for _, s := range created {
		_ = s.file.Close() // being removed: its contents no longer matter
		if err := l.fs.Remove(s.path); err != nil && !notExist(err) {
			ok = false
		}
	}
	if len(created) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			ok = false
		}
	}
	if err := active.file.Truncate(active.size); err != nil {
		return false
	}
	if err := active.file.Sync(); err != nil {
		return false
	}
	return ok
}

// publish makes a written batch visible to readers.
func (l *Log) publish(parts []*part, pending map[string]*pendingTopic, n, mark uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &l.mu.state
	for i, p := range parts {
		s := p.seg
		if p.hlen > 0 {
			st.segs = append(st.segs, s)
			st.bytes += s.size // the header
		}
		if len(p.offs) > 0 {
			if len(s.offs) == 0 {
				s.firstTime = p.firstTime
			}
			s.maxTime = max(s.maxTime, p.maxTime)
			s.offs = append(s.offs, p.offs...)
		}
		end := p.base + int64(len(p.buf))
		st.bytes += end - s.size
		s.size = end
		if i < len(parts)-1 {
			s.offs = slices.Clone(s.offs) // sealed: exact size
		}
	}
	for name, p := range pending {
		t := p.t
		if t == nil {
			t = &topicState{name: name, first: 1}
			st.topics[name] = t
		}
		for _, q := range p.seqs {
			t.seqs.push(q)
		}
		t.last = p.last
		if p.retained != 0 {
			t.retained = p.retained
		}
	}
	st.next += n
	st.lastMark = mark
	st.records += n
}
