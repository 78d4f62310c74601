package topiclog

import (
	"fmt"
	"log/slog"
	"time"
)

// SyncPolicy says when appends reach stable storage.
type SyncPolicy uint8

const (
	// SyncAlways fsyncs every batch before AppendBatch returns: a returned
	// batch survives a crash of the process or the machine. The zero value.
	SyncAlways SyncPolicy = iota
	// SyncNone never fsyncs a batch (segments are still synced when they are
	// sealed, see doc.go): for tests, and for replicas whose durability comes
	// from the Raft log (after a crash the log may lack a suffix of what was
	// appended; LastMark says how far it got).
	SyncNone
)

func (p SyncPolicy) String() string {
	switch p {
	case SyncAlways:
		return "always"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(p))
}

// Limits of the format and of Options.
const (
	MinSegmentBytes     = 1 << 10
	MaxSegmentBytes     = 1 << 30
	DefaultSegmentBytes = 16 << 20
	// MaxBatchBytes bounds the encoded size of one batch, so that every
	// record of a segment starts below 4 GiB (offsets are 32 bits).
	MaxBatchBytes = 1 << 30
	// MaxTopicLen is the longest topic name (the MQTT limit).
	MaxTopicLen = 1<<16 - 1
)

// Options configure a Log. The zero value is valid: 16 MiB segments, no
// age-based roll, SyncAlways, no logging.
type Options struct {
	// SegmentBytes is the size at which the active segment is sealed and a
	// new one started (0: DefaultSegmentBytes). A segment exceeds it by at
	// most one batch, since a batch is never split.
	SegmentBytes int64
	// SegmentAge, if positive, also seals the active segment before a batch
	// whose first record's time is SegmentAge or more after the segment's
	// first record, so that age-based retention can delete a quiet log's
	// data (it deletes whole sealed segments only). The roll depends only on
	// the appended batches, so replicas stay byte-identical.
	SegmentAge time.Duration
	// Sync is the durability policy of appends.
	Sync SyncPolicy
	// Logger receives recovery warnings (torn tails truncated, interrupted
	// restores finished). Nil: discard.
	Logger *slog.Logger
}

// Validate reports options the log refuses, wrapping ErrInvalid.
func (o Options) Validate() error {
	if o.SegmentBytes != 0 && (o.SegmentBytes < MinSegmentBytes || o.SegmentBytes > MaxSegmentBytes) {
		return fmt.Errorf("%w: segment size %d outside [%d, %d]", ErrInvalid, o.SegmentBytes, MinSegmentBytes, MaxSegmentBytes)
	}
	if o.SegmentAge < 0 {
		return fmt.Errorf("%w: negative segment age %v", ErrInvalid, o.SegmentAge)
	}
	if o.Sync != SyncAlways && o.Sync != SyncNone {
		return fmt.Errorf("%w: unknown sync policy %d", ErrInvalid, uint8(o.Sync))
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Retention bounds what the log keeps. Zero fields impose no bound. It is
// applied by Log.ApplyRetention, which deletes whole sealed segments only,
// oldest first, so each bound is a floor on what is deleted, not an exact
// size: see ApplyRetention.
type Retention struct {
	// MaxRecordsPerTopic: a record may go once its topic has at least this
	// many newer records.
	MaxRecordsPerTopic uint64
	// MaxBytes: segments go, oldest first, while the log's files exceed it.
	MaxBytes int64
	// MaxAge: a segment goes once its newest record is older than this
	// (record times against the now passed to ApplyRetention).
	MaxAge time.Duration
}

// Validate reports a retention the log refuses, wrapping ErrInvalid.
func (r Retention) Validate() error {
	if r.MaxBytes < 0 {
		return fmt.Errorf("%w: negative retention bytes %d", ErrInvalid, r.MaxBytes)
	}
	if r.MaxAge < 0 {
		return fmt.Errorf("%w: negative retention age %v", ErrInvalid, r.MaxAge)
	}
	return nil
}
