package topiclog

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by the log wrap one of these (test with
// errors.Is) or, for ErrCompacted, are a *CompactedError.
var (
	// ErrCompacted: the requested index or position is below the first one
	// retention has kept. The error is a *CompactedError carrying that first
	// one, so a reader can resume from it.
	ErrCompacted = errors.New("topiclog: compacted")
	// ErrNotFound: the requested index is beyond the topic's last one, or the
	// topic holds no (retained) record.
	ErrNotFound = errors.New("topiclog: not found")
	// ErrCorrupt: the log's files (or a snapshot stream) hold bytes the log
	// could not have written: a bad checksum or an inconsistent sequence
	// anywhere but in the torn tail of the last segment.
	ErrCorrupt = errors.New("topiclog: corrupt")
	// ErrInvalid: the caller passed an argument the log refuses (an empty or
	// over-long topic, a time outside what the format stores, a batch too
	// large, bad options). Nothing was written.
	ErrInvalid = errors.New("topiclog: invalid argument")
	// ErrFailed: an earlier write or sync failed in a way that leaves the
	// durability of the file unknown; the log refuses further writes until it
	// is reopened (which recovers from what is on disk). Reads still work.
	ErrFailed = errors.New("topiclog: failed")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("topiclog: closed")
)

// CompactedError is the error of a read below the first retained record. It
// matches ErrCompacted with errors.Is.
type CompactedError struct {
	// First is the first index (for topic reads) or position (for position
	// reads) still held.
	First uint64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("topiclog: compacted (first available is %d)", e.First)
}

// Is makes errors.Is(err, ErrCompacted) true.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

func compacted(first uint64) error { return &CompactedError{First: first} }
