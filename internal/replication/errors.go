package replication

import (
	"errors"
	"fmt"
)

// Errors of the replication package; test them with errors.Is.
var (
	// ErrConfig marks an invalid Config, Timeouts or GroupID.
	ErrConfig = errors.New("replication: invalid config")
	// ErrClosed: the group or engine was closed, or this replica was
	// removed from its group.
	ErrClosed = errors.New("replication: closed")
	// ErrNotLeader: this replica does not lead its group. The error is a
	// *NotLeaderError naming the leader this replica knows of, if any.
	ErrNotLeader = errors.New("replication: not the leader")
	// ErrUnknownOutcome: the proposal reached Raft but its fate is unknown
	// (leadership was lost before it committed, or the caller's context
	// ended while it was in flight). It may have been applied; a caller
	// that retries must be able to recognise the repeat (the sequencing
	// state machine deduplicates publisher retransmissions).
	ErrUnknownOutcome = errors.New("replication: outcome unknown")
	// ErrBudget: opening the group would exceed Config.MaxGroups.
	ErrBudget = errors.New("replication: group budget exhausted")
	// ErrExists: a group with this id is already open on this engine.
	ErrExists = errors.New("replication: group already open")
	// ErrBootstrapped: Bootstrap was called on a group that already has
	// state (it was bootstrapped before, or joined an existing group).
	ErrBootstrapped = errors.New("replication: group already has state")
	// ErrFailed: the state machine reported a fatal error (its storage
	// failed); the replica stopped applying and shut down. Reopen the
	// group to recover from the state machine's durable state and the log.
	ErrFailed = errors.New("replication: state machine failed")
	// ErrRefused: the remote node refused a group connection (it does not
	// run the group, or is not the node the address was expected to reach).
	ErrRefused = errors.New("replication: connection refused")
	// ErrCorrupt: a group's stored state is inconsistent (a snapshot
	// without a valid header, or a state machine ahead of the log).
	ErrCorrupt = errors.New("replication: corrupt state")
)

// NotLeaderError is returned by calls that only the leader can serve. Leader
// is the leader this replica knows of (ID empty when none is known); the
// caller should retry there, or wait for Leadership.
type NotLeaderError struct {
	Group  GroupID
	Leader Leader
}

func (e *NotLeaderError) Error() string {
	if e.Leader.ID == "" {
		return fmt.Sprintf("replication: group %s: not the leader (no leader known)", e.Group)
	}
	return fmt.Sprintf("replication: group %s: not the leader (leader %s at %s)", e.Group, e.Leader.ID, e.Leader.Addr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
