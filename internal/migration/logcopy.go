package migration

import (
	"fmt"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// ErrMismatch reports handed records that would not land where they were.
var ErrMismatch = fmt.Errorf("migration: handed records do not fit the log")

// appendRaw appends records read from another replica's log (ReadRaw) to
// l: the first must be at l's next position; each run of records with one
// mark is appended as one batch. Records that would land at another
// position or index than they had are refused (the log may then hold the
// batches before them: the caller drops a log it failed to fill).
func appendRaw(l *topiclog.Log, recs []topiclog.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if next := l.NextSeq(); recs[0].Seq != next {
		return fmt.Errorf("%w: they start at position %d, the log at %d", ErrMismatch, recs[0].Seq, next)
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
		app, err := l.AppendBatch(batch)
		if err != nil {
			return fmt.Errorf("migration: append handed records: %w", err)
		}
		for k, r := range recs[i:j] {
			if app.FirstSeq+uint64(k) != r.Seq || app.Indexes[k] != r.Index {
				return fmt.Errorf("%w: record %d of %s landed at position %d index %d", ErrMismatch,
					r.Seq, r.Topic, app.FirstSeq+uint64(k), app.Indexes[k])
			}
		}
		i = j
	}
	return nil
}
