package sequencer

import (
	"fmt"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// Handing a group of one replica over to another node (internal/migration):
// the old home sends a snapshot (Snapshot, Persist) while it still takes
// publishes, then, once fenced, the records appended since (ReadRaw); the
// new node restores the snapshot into a sequencer of its own and appends
// the records (AppendRaw), after which its log holds the same records at
// the same positions, with the same indexes, times and marks.

// ReadRaw returns up to maxRecords records (and about maxBytes) from
// position from, as the log holds them (payloads are envelopes).
func (s *Sequencer) ReadRaw(from uint64, maxRecords, maxBytes int) ([]topiclog.Record, error) {
	return s.log.ReadSeq(from, maxRecords, maxBytes)
}

// AppendRaw appends records read from another replica's log with ReadRaw:
// the first must be at NextSeq, and each run of records with one mark is
// appended as one batch. It refuses records that would not land at the
// positions and indexes they had (ErrInvalid). The dedup table is not
// updated: a sequencer that was handed records is closed and opened again
// (Open rebuilds the table from the log) before it applies anything.
func (s *Sequencer) AppendRaw(recs []topiclog.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if next := s.log.NextSeq(); recs[0].Seq != next {
		return fmt.Errorf("sequencer: append handed records: %w: they start at position %d, the log at %d", ErrInvalid, recs[0].Seq, next)
	}
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].Mark == recs[i].Mark {
			j++
		}
		batch := make([]topiclog.Entry, 0, j-i)
		for _, r := range recs[i:j] {
			batch = append(batch, topiclog.Entry{Topic: r.Topic, Payload: r.Payload, Time: r.Time, Mark: r.Mark, Retain: r.Retain})
		}
		app, err := s.log.AppendBatch(batch)
		if err != nil {
			return fmt.Errorf("sequencer: append handed records: %w", err)
		}
		for k, r := range recs[i:j] {
			if app.FirstSeq+uint64(k) != r.Seq || app.Indexes[k] != r.Index {
				return s.fail(fmt.Errorf("append handed records: %w: record %d of %s landed at position %d index %d",
					ErrInvalid, r.Seq, r.Topic, app.FirstSeq+uint64(k), app.Indexes[k]))
			}
		}
		s.applied.Store(recs[j-1].Mark)
		i = j
	}
	s.notify()
	return nil
}
