package sequencer

import (
	"github.com/sextantmq/sextant/internal/topiclog"
)

// Handing a group of one replica over to another node (internal/migration):
// the old home sends its log's snapshot (LogSnapshot) while it still takes
// publishes, then, once fenced, the records appended since (ReadRaw). The
// new node restores the one and appends the other to a topic log of its
// own, then opens a sequencer on it, which rebuilds the dedup table from
// the log (the table is a function of the log alone).

// LogSnapshot captures the topic log's state (topiclog.Log.Snapshot). Unlike
// Snapshot it may be called from any goroutine while Apply runs: it holds
// no dedup table.
func (s *Sequencer) LogSnapshot() (*topiclog.Snapshot, error) { return s.log.Snapshot() }

// ReadRaw returns up to maxRecords records (and about maxBytes) from
// position from, as the log holds them (payloads are envelopes).
func (s *Sequencer) ReadRaw(from uint64, maxRecords, maxBytes int) ([]topiclog.Record, error) {
	return s.log.ReadSeq(from, maxRecords, maxBytes)
}
