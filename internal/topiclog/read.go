package topiclog

import (
	"fmt"
	"sort"
	"time"
)

// Reads find what to read under a read lock (a few slice lookups), take a
// reference on the segments involved, and read and decode them after
// releasing the lock, so appends and other reads are never held up by a
// reader's disk I/O. Every record read is checked against its checksum.

// span is a run of records adjacent in one segment, read with one ReadAt.
type span struct {
	seg  *segment
	off  int64
	n    int64 // bytes
	recs int
}

// spans collects what a read wants; held under Log.mu.RLock.
type spans struct {
	list     []span
	records  int
	bytes    int64
	maxRecs  int
	maxBytes int64
}

// add appends the i-th record of seg, unless a limit is reached (the first
// record is always taken). It reports whether the record was taken.
func (sp *spans) add(seg *segment, i int) bool {
	off, n := seg.recordSpan(i)
	if sp.records >= sp.maxRecs || sp.records > 0 && sp.maxBytes > 0 && sp.bytes+n > sp.maxBytes {
		return false
	}
	sp.records++
	sp.bytes += n
	if k := len(sp.list) - 1; k >= 0 && sp.list[k].seg == seg && sp.list[k].off+sp.list[k].n == off {
		sp.list[k].n += n
		sp.list[k].recs++
		return true
	}
	seg.acquire()
	sp.list = append(sp.list, span{seg: seg, off: off, n: n, recs: 1})
	return true
}

func (sp *spans) release() {
	for _, s := range sp.list {
		s.seg.release()
	}
}

// read reads and decodes the spans (without the lock), appending to out.
// topic, if not empty, is the one topic every record must have; its string
// is reused for each record.
func (sp *spans) read(out []Record, topic string) ([]Record, error) {
	defer sp.release()
	var prevTopic string
	for _, s := range sp.list {
		buf := make([]byte, s.n)
		if _, err := s.seg.file.ReadAt(buf, s.off); err != nil {
			return out, fmt.Errorf("topiclog: read %s at %d: %w", s.seg.path, s.off, err)
		}
		for range s.recs {
			body, n, err := parseFrame(buf)
			if err != nil {
				return out, fmt.Errorf("%w: %s near %d: %w", ErrCorrupt, s.seg.path, s.off, err)
			}
			rc, err := parseRecord(body)
			if err != nil {
				return out, fmt.Errorf("%w: %s near %d: bad record", ErrCorrupt, s.seg.path, s.off)
			}
			r := Record{Seq: rc.seq, Index: rc.index, Time: time.Unix(0, rc.time).UTC(), Mark: rc.mark, Retain: rc.retain}
			switch {
			case topic != "":
				if string(rc.topic) != topic {
					return out, fmt.Errorf("%w: %s: record %d is not of topic %q", ErrCorrupt, s.seg.path, rc.seq, topic)
				}
				r.Topic = topic
			case string(rc.topic) == prevTopic:
				r.Topic = prevTopic
			default:
				r.Topic = string(rc.topic)
				prevTopic = r.Topic
			}
			// The payload aliases buf, which belongs to this read only.
			r.Payload = rc.payload[:len(rc.payload):len(rc.payload)]
			if len(r.Payload) == 0 {
				r.Payload = nil
			}
			out = append(out, r)
			buf = buf[n:]
		}
		if len(buf) != 0 {
			return out, fmt.Errorf("%w: %s near %d: records do not fill their span", ErrCorrupt, s.seg.path, s.off)
		}
	}
	return out, nil
}

// segmentOf returns the index of the segment holding position seq (which
// the caller has checked is held).
func segmentOf(segs []*segment, seq uint64) int {
	return sort.Search(len(segs), func(i int) bool { return segs[i].first > seq }) - 1
}

// addSeq adds the record at position seq (held) to sp.
func (sp *spans) addSeq(segs []*segment, seq uint64) bool {
	s := segs[segmentOf(segs, seq)]
	return sp.add(s, int(seq-s.first))
}

func (l *Log) rlock() error {
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Get returns the record of topic with the given index. Below the topic's
// first retained index it returns a *CompactedError (ErrCompacted); beyond
// its last, or for a topic never seen, ErrNotFound.
func (l *Log) Get(topic string, index uint64) (Record, error) {
	recs, err := l.Range(topic, index, 1, 0)
	if err != nil {
		return Record{}, err
	}
	if len(recs) == 0 {
		return Record{}, fmt.Errorf("%w: %q index %d", ErrNotFound, topic, index)
	}
	return recs[0], nil
}

// Range returns the topic's records with indexes from from on, at most
// maxRecords of them (which must be positive) and, if maxBytes is positive,
// no more than maxBytes of encoded records (but always at least one). Below
// the first retained index it returns a *CompactedError (ErrCompacted);
// from beyond the last index (or for a topic never seen) it returns no
// records and no error, so a reader can poll for more.
func (l *Log) Range(topic string, from uint64, maxRecords, maxBytes int) ([]Record, error) {
	if maxRecords <= 0 {
		return nil, fmt.Errorf("%w: maxRecords %d", ErrInvalid, maxRecords)
	}
	if err := l.rlock(); err != nil {
		return nil, err
	}
	t := l.mu.topics[topic]
	if t == nil {
		l.mu.RUnlock()
		return nil, nil
	}
	if from < t.first {
		l.mu.RUnlock()
		return nil, compacted(t.first)
	}
	sp := spans{maxRecs: maxRecords, maxBytes: int64(maxBytes)}
	for i := from; i <= t.last; i++ {
		if !sp.addSeq(l.mu.segs, t.seqs.at(int(i-t.first))) {
			break
		}
	}
	l.mu.RUnlock()
	return sp.read(make([]Record, 0, sp.records), topic)
}

// ReadSeq returns the records at positions from from on, of every topic, in
// log order, with the same limits as Range. Below the first retained
// position it returns a *CompactedError (ErrCompacted) carrying it; from
// NextSeq on it returns no records and no error. This is the read of
// subscriber cursors and replays.
func (l *Log) ReadSeq(from uint64, maxRecords, maxBytes int) ([]Record, error) {
	if maxRecords <= 0 {
		return nil, fmt.Errorf("%w: maxRecords %d", ErrInvalid, maxRecords)
	}
	if err := l.rlock(); err != nil {
		return nil, err
	}
	segs := l.mu.segs
	if first := segs[0].first; from < first {
		l.mu.RUnlock()
		return nil, compacted(first)
	}
	sp := spans{maxRecs: maxRecords, maxBytes: int64(maxBytes)}
	if from < l.mu.next {
		k0 := segmentOf(segs, from)
		i := int(from - segs[k0].first)
	fill:
		for _, s := range segs[k0:] {
			for ; i < len(s.offs); i++ {
				if !sp.add(s, i) {
					break fill
				}
			}
			i = 0
		}
	}
	l.mu.RUnlock()
	return sp.read(make([]Record, 0, sp.records), "")
}

// Latest returns the topic's last record, or ErrNotFound if it holds none
// (never seen, or all removed by retention).
func (l *Log) Latest(topic string) (Record, error) {
	return l.latest(topic, false)
}

// LatestRetained returns the topic's latest record appended with Retain:
// a sequenced topic's retained message. ErrNotFound if there is none, or if
// retention has removed it (the log does not interpret payloads: an empty
// payload, MQTT's way of clearing a retained message, is returned as is).
func (l *Log) LatestRetained(topic string) (Record, error) {
	return l.latest(topic, true)
}

func (l *Log) latest(topic string, retained bool) (Record, error) {
	if err := l.rlock(); err != nil {
		return Record{}, err
	}
	t := l.mu.topics[topic]
	var seq uint64
	switch {
	case t == nil:
	case retained:
		seq = t.retained
	case t.seqs.len() > 0:
		seq = t.seqs.at(t.seqs.len() - 1)
	}
	if seq == 0 {
		l.mu.RUnlock()
		return Record{}, fmt.Errorf("%w: no record of %q", ErrNotFound, topic)
	}
	sp := spans{maxRecs: 1}
	sp.addSeq(l.mu.segs, seq)
	l.mu.RUnlock()
	recs, err := sp.read(make([]Record, 0, 1), topic)
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}
