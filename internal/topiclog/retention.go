package topiclog

import (
	"fmt"
	"math"
	"time"
)

// Removed reports what ApplyRetention deleted.
type Removed struct {
	Segments int
	Records  uint64
	Bytes    int64
	FirstSeq uint64 // the first position held afterwards
}

// ApplyRetention deletes the oldest sealed segments that r allows to go, at
// the caller's now (the log reads no clock). A sealed segment goes when one
// bound alone allows all of it to go:
//
//   - MaxRecordsPerTopic: every topic with records in it (or before it) has
//     at least that many records after it;
//   - MaxBytes: the log's files, without it, still exceed MaxBytes;
//   - MaxAge: its newest record is more than MaxAge older than now.
//
// Deletion stops at the first segment that must stay, and the active
// segment always stays, so each bound is a floor: a topic keeps at least its
// last MaxRecordsPerTopic records, and more may remain until their whole
// segment can go (Options.SegmentAge bounds how long a quiet log keeps
// records in its active segment). Each topic's first index moves past its
// deleted records; reads below it return ErrCompacted.
//
// Removed is valid even with an error. The records are gone from the log's
// view before their files are removed; if a removal fails, the error says
// so, the file comes back at the next Open (its records readable again) and
// the next retention deletes it.
//
// Replicas that apply retention at different times hold different prefixes
// of the same log; to keep them identical, replicate the call (with its now)
// through the group's Raft log.
func (l *Log) ApplyRetention(r Retention, now time.Time) (Removed, error) {
	if err := r.Validate(); err != nil {
		return Removed{}, err
	}
	nowNs, ok := unixNanos(now)
	if !ok {
		return Removed{}, fmt.Errorf("%w: now %v outside what the log stores", ErrInvalid, now)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w.closed {
		return Removed{}, ErrClosed
	}
	if l.w.failed != nil {
		return Removed{}, fmt.Errorf("topiclog: retention: %w", l.w.failed)
	}
	st := &l.mu.state // the writer may read it without mu
	cutoff := int64(math.MinInt64)
	if r.MaxAge > 0 && nowNs > math.MinInt64+int64(r.MaxAge) {
		cutoff = nowNs - int64(r.MaxAge)
	}
	var rm Removed
	k := 0
	for ; k < len(st.segs)-1; k++ {
		s := st.segs[k]
		byAge := r.MaxAge > 0 && s.maxTime < cutoff
		byBytes := r.MaxBytes > 0 && st.bytes-rm.Bytes > r.MaxBytes
		byCount := r.MaxRecordsPerTopic > 0 && countAllows(st.topics, s.first+s.count(), r.MaxRecordsPerTopic)
		if !byAge && !byBytes && !byCount {
			break
		}
		rm.Segments++
		rm.Records += s.count()
		rm.Bytes += s.size
	}
	rm.FirstSeq = st.segs[k].first
	if k == 0 {
		return rm, nil
	}
	gone := st.segs[:k:k]
	// Publish first, so no new read reaches the files; reads in progress
	// hold references and finish on the open handles.
	l.mu.Lock()
	st.segs = st.segs[k:]
	st.bytes -= rm.Bytes
	st.records -= rm.Records
	for _, t := range st.topics {
		if c := t.seqs.countBelow(rm.FirstSeq); c > 0 {
			t.seqs.dropFront(c)
			t.first += uint64(c)
		}
		if t.retained < rm.FirstSeq {
			t.retained = 0
		}
	}
	l.mu.Unlock()
	var err error
	for _, s := range gone {
		if rerr := l.fs.Remove(s.path); rerr != nil && !notExist(rerr) && err == nil {
			err = fmt.Errorf("topiclog: retention: remove %s: %w", s.path, rerr)
		}
		s.release()
	}
	// A removal lost in a crash only brings an old segment back, which the
	// next retention deletes again.
	if serr := l.fs.SyncDir(l.dir); serr != nil && err == nil {
		err = fmt.Errorf("topiclog: retention: sync %s: %w", l.dir, serr)
	}
	return rm, err
}

// countAllows reports whether every topic keeps at least keep records at
// positions from end on (so the records before end may all go).
func countAllows(topics map[string]*topicState, end, keep uint64) bool {
	for _, t := range topics {
		before := uint64(t.seqs.countBelow(end))
		if before > 0 && uint64(t.seqs.len())-before < keep {
			return false
		}
	}
	return true
}
