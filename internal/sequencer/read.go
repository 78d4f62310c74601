package sequencer

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// Record is a sequenced message as readers see it: the topic log's record
// with the sequencer's envelope taken off.
type Record struct {
	Seq   uint64 // position in the group's log
	Topic string
	Index uint64 // index in its topic (sx-index)
	Time  time.Time
	// Mark is the Raft index of the entry that appended the record.
	Mark    uint64
	Retain  bool
	QoS     byte
	Key     Key    // the publisher's dedup key (PacketID 0: none)
	Message []byte // the encoded message; records of one read may share an array
}

// The format's time range (int64 Unix nanoseconds), as the log checks it.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func timeStorable(t time.Time) bool { return !t.Before(minTime) && !t.After(maxTime) }

func decodeRecords(recs []topiclog.Record) ([]Record, error) {
	out := make([]Record, len(recs))
	for i := range recs {
		r, err := decodeRecord(&recs[i])
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func decodeRecord(r *topiclog.Record) (Record, error) {
	env, err := decodeEnvelope(r.Payload)
	if err != nil {
		return Record{}, fmt.Errorf("sequencer: record %d: %w", r.Seq, err)
	}
	return Record{Seq: r.Seq, Topic: r.Topic, Index: r.Index, Time: r.Time, Mark: r.Mark, Retain: r.Retain,
		QoS: env.qos, Key: env.key, Message: env.message}, nil
}

// The reads below are the topic log's (topiclog.Log has their contract in
// full: limits, ErrCompacted with the first available index or position,
// ErrNotFound), with records decoded. They are safe to call at any time,
// concurrently with Apply and with each other.

// ReadSeq returns the records at positions from from on, in log order.
// Near the log's end it answers from the records kept in memory (recent.go),
// without copying them: the records returned must not be modified.
func (s *Sequencer) ReadSeq(from uint64, maxRecords, maxBytes int) ([]Record, error) {
	s.recent.reads.Add(1)
	if maxRecords > 0 {
		// The log's first position is read after the records: if it is
		// still at or below from, the log held them all at that moment.
		if recs, ok := s.recent.read(from, maxRecords, maxBytes); ok && from >= s.log.FirstSeq() {
			s.recent.hits.Add(1)
			return recs, nil
		}
	}
	recs, err := s.log.ReadSeq(from, maxRecords, maxBytes)
	if err != nil {
		return nil, err
	}
	if len(recs) > 0 {
		s.recent.misses.Add(1)
	}
	return decodeRecords(recs)
}

// Range returns topic's records with indexes from from on.
func (s *Sequencer) Range(topic string, from uint64, maxRecords, maxBytes int) ([]Record, error) {
	recs, err := s.log.Range(topic, from, maxRecords, maxBytes)
	if err != nil {
		return nil, err
	}
	return decodeRecords(recs)
}

// Get returns topic's record with the given index.
func (s *Sequencer) Get(topic string, index uint64) (Record, error) {
	r, err := s.log.Get(topic, index)
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(&r)
}

// Latest returns topic's last record.
func (s *Sequencer) Latest(topic string) (Record, error) {
	r, err := s.log.Latest(topic)
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(&r)
}

// LatestRetained returns topic's latest record published with retain: its
// retained message.
func (s *Sequencer) LatestRetained(topic string) (Record, error) {
	r, err := s.log.LatestRetained(topic)
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(&r)
}

// Bounds returns topic's first and last retained index (see
// topiclog.Log.Bounds).
func (s *Sequencer) Bounds(topic string) (first, last uint64, ok bool) { return s.log.Bounds(topic) }

// Topics returns every topic the group's log has seen, sorted.
func (s *Sequencer) Topics() []string { return s.log.Topics() }

// FirstSeq and NextSeq bound the positions held: [FirstSeq, NextSeq).
func (s *Sequencer) FirstSeq() uint64 { return s.log.FirstSeq() }

// NextSeq is the position the next record will get.
func (s *Sequencer) NextSeq() uint64 { return s.log.NextSeq() }

// Changed returns a channel closed at the next change of the log (records
// appended, retention, a restore) and at Close. Take it before reading, so
// a change between the read and the wait is not missed.
func (s *Sequencer) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.changed
}

// WaitSeq blocks until the log holds a record at position seq (NextSeq() >
// seq), the sequencer closes (ErrClosed) or ctx ends. A live feed that has
// read up to position p waits with WaitSeq(ctx, p+1).
func (s *Sequencer) WaitSeq(ctx context.Context, seq uint64) error {
	for {
		s.mu.Lock()
		ch, closed := s.mu.changed, s.mu.closed
		s.mu.Unlock()
		if closed {
			return ErrClosed
		}
		if s.log.NextSeq() > seq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("sequencer: wait for position %d: %w", seq, ctx.Err())
		}
	}
}
