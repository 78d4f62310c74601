package sequencer

import "errors"

// Sentinel errors; errors returned by the package wrap one of these (or a
// topiclog error, for reads).
var (
	// ErrInvalid: a command or an argument the sequencer refuses: an
	// undecodable command, a publish that breaks a limit. A refused entry
	// changes nothing, on every replica alike.
	ErrInvalid = errors.New("sequencer: invalid")
	// ErrCorrupt: stored bytes (a record's envelope, a snapshot) that the
	// sequencer could not have written.
	ErrCorrupt = errors.New("sequencer: corrupt")
	// ErrClosed: the sequencer was closed.
	ErrClosed = errors.New("sequencer: closed")
)
