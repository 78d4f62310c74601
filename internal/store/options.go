package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// FsyncMode says when committed data is forced to stable storage. See the
// package documentation for what each mode survives.
type FsyncMode int

const (
	// FsyncAlways fsyncs every transaction before its batches are reported
	// durable. Group commit amortises the fsyncs over concurrent committers.
	FsyncAlways FsyncMode = iota
	// FsyncBatch reports a batch durable once it is written to the OS page
	// cache and fsyncs every SyncInterval and at Close.
	FsyncBatch
	// FsyncNever never fsyncs while running (only at Close); the OS decides
	// when data reaches the disk.
	FsyncNever
)

var fsyncNames = [...]string{FsyncAlways: "always", FsyncBatch: "batch", FsyncNever: "never"}

// String returns the mode's name as ParseFsyncMode accepts it.
func (m FsyncMode) String() string {
	if m >= 0 && int(m) < len(fsyncNames) {
		return fsyncNames[m]
	}
	return fmt.Sprintf("FsyncMode(%d)", int(m))
}

// ParseFsyncMode parses "always", "batch" or "never" (case-insensitive).
func ParseFsyncMode(s string) (FsyncMode, error) {
	for m, name := range fsyncNames {
		if strings.EqualFold(s, name) {
			return FsyncMode(m), nil
		}
	}
	return 0, fmt.Errorf("%w: fsync mode %q (want always, batch or never)", ErrOptions, s)
}

// MarshalText and UnmarshalText let config files and flags carry the mode by name.
func (m FsyncMode) MarshalText() ([]byte, error) {
	if m < 0 || int(m) >= len(fsyncNames) {
		return nil, fmt.Errorf("%w: fsync mode %d", ErrOptions, int(m))
	}
	return []byte(m.String()), nil
}

func (m *FsyncMode) UnmarshalText(b []byte) error {
	v, err := ParseFsyncMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Options configure a Store. The zero value is valid and means the defaults.
type Options struct {
	// Fsync is the durability mode (default FsyncAlways).
	Fsync FsyncMode
	// SyncInterval is how often FsyncBatch fsyncs written data (default 100ms).
	SyncInterval time.Duration
	// MaxBatchOps cuts a transaction once it holds this many operations
	// (default 4096). A single Batch is never split, so one transaction can
	// exceed it by the size of its last batch.
	MaxBatchOps int
	// QueueLen bounds the queue of batches waiting for the writer (default
	// 8192). Commit blocks while it is full.
	QueueLen int
	// LockTimeout is how long Open waits for another process's lock on the
	// file (default 1s).
	LockTimeout time.Duration
	// Observer receives commit and sync timings; nil means none.
	Observer Observer
	// Clock drives the FsyncBatch sync timer (default clock.Real).
	Clock clock.Clock
}

// Default values for Options fields left zero.
const (
	DefaultSyncInterval = 100 * time.Millisecond
	DefaultMaxBatchOps  = 4096
	DefaultQueueLen     = 8192
	DefaultLockTimeout  = time.Second
)

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.MaxBatchOps == 0 {
		o.MaxBatchOps = DefaultMaxBatchOps
	}
	if o.QueueLen == 0 {
		o.QueueLen = DefaultQueueLen
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o
}

// Validate reports options that cannot work. Zero fields are valid (defaults).
func (o Options) Validate() error {
	switch {
	case o.Fsync < FsyncAlways || o.Fsync > FsyncNever:
		return fmt.Errorf("%w: fsync mode %d", ErrOptions, int(o.Fsync))
	case o.SyncInterval < 0:
		return fmt.Errorf("%w: negative sync interval %v", ErrOptions, o.SyncInterval)
	case o.MaxBatchOps < 0:
		return fmt.Errorf("%w: negative max batch ops %d", ErrOptions, o.MaxBatchOps)
	case o.QueueLen < 0:
		return fmt.Errorf("%w: negative queue length %d", ErrOptions, o.QueueLen)
	case o.LockTimeout < 0:
		return fmt.Errorf("%w: negative lock timeout %v", ErrOptions, o.LockTimeout)
	}
	return nil
}

// CommitInfo describes one write transaction.
type CommitInfo struct {
	Batches int // batches (Commit calls) the transaction carried
	Ops     int // operations in those batches
	// Apply is the time spent building the transaction in memory.
	Apply time.Duration
	// Write is the time spent writing its pages and meta page to the file;
	// with FsyncAlways it includes bbolt's two fdatasyncs.
	Write time.Duration
}

// Observer receives the store's timings, for metrics. Its methods are called
// from the writer goroutine and must not block.
type Observer interface {
	// ObserveCommit reports one successful write transaction.
	ObserveCommit(CommitInfo)
	// ObserveSync reports one explicit fsync (FsyncBatch's periodic sync,
	// or the sync at Close).
	ObserveSync(time.Duration)
}

type nopObserver struct{}

var _ Observer = nopObserver{}

func (nopObserver) ObserveCommit(CommitInfo)  {}
func (nopObserver) ObserveSync(time.Duration) {}
