package replication

import (
	"context"
	"fmt"
	"time"
)

// Replica is this node's replica of a group, replicated (*Group) or not
// (*Single): what the sequencer needs to order commands. Membership changes
// are on *Group only.
type Replica[R any] interface {
	// Submit queues cmd for the log and returns once it is queued, so a
	// caller that submits in sequence gets its commands into the log in
	// that order without waiting for each commit (a publisher's in-flight
	// window stays open). Only the leader accepts commands.
	Submit(ctx context.Context, cmd []byte) (*Pending[R], error)
	// Propose is Submit then Wait.
	Propose(ctx context.Context, cmd []byte) (R, error)
	// Leader returns the leader this replica knows of.
	Leader() Leader
	// IsLeader reports whether this replica leads its group.
	IsLeader() bool
	// Leadership delivers the leader whenever it changes (see Leader);
	// only the newest unread value is kept.
	Leadership() <-chan Leader
	// Stats returns the replica's figures.
	Stats() Stats
	// Close stops the replica (without handing leadership over).
	Close() error
}

var (
	_ Replica[int] = (*Group[int])(nil)
	_ Replica[int] = (*Single[int])(nil)
)

// Leader is a group's leader as one replica knows it.
type Leader struct {
	// ID and Addr are the leader's node id and cluster address; both empty
	// when no leader is known.
	ID   string
	Addr string
	// Term is the leader's term (0 when no leader is known). It grows with
	// every election, so it serves as the group's epoch.
	Term uint64
	// Local: this replica is the leader.
	Local bool
}

func (l Leader) String() string {
	if l.ID == "" {
		return "none"
	}
	return fmt.Sprintf("%s (term %d)", l.ID, l.Term)
}

// Member is a replica in a group's configuration.
type Member struct {
	ID   string // node id
	Addr string // the node's cluster address
	// Voter: counts for elections and commits; a learner (non-voter)
	// receives the log without counting.
	Voter bool
}

// Role is a replica's part in its group.
type Role string

// Roles.
const (
	RoleLeader    Role = "leader"
	RoleCandidate Role = "candidate"
	RoleFollower  Role = "follower"
	RoleLearner   Role = "learner"
	// RoleNone: the replica is not in the group's latest configuration
	// (not added yet, or removed).
	RoleNone Role = "none"
	// RoleShutdown: the replica was closed or failed.
	RoleShutdown Role = "shutdown"
)

var roles = []Role{RoleLeader, RoleCandidate, RoleFollower, RoleLearner, RoleNone, RoleShutdown}

// Stats are one replica's figures, for the admin API and tests.
type Stats struct {
	Group  GroupID
	Role   Role
	Leader Leader
	// Term is the replica's current term.
	Term uint64
	// LastIndex is the last entry in the replica's log; CommitIndex the
	// last one it knows committed; Applied the last one its state machine
	// holds; SnapshotIndex the one its newest snapshot covers.
	LastIndex     uint64
	CommitIndex   uint64
	Applied       uint64
	SnapshotIndex uint64
	// Members is the latest configuration (possibly not committed yet),
	// sorted by id.
	Members []Member
	// Queued proposals wait to enter Raft; InFlight ones are in Raft and
	// not answered yet.
	Queued   int
	InFlight int
}

// Pending is a submitted command waiting for its result.
type Pending[R any] struct {
	cmd   []byte
	start time.Time
	done  chan struct{}
	res   R
	err   error
}

func newPending[R any](cmd []byte, start time.Time) *Pending[R] {
	return &Pending[R]{cmd: cmd, start: start, done: make(chan struct{})}
}

// resolve records the outcome; called exactly once.
func (p *Pending[R]) resolve(res R, err error) {
	p.res, p.err = res, err
	close(p.done)
}

// Done is closed once the result is known.
func (p *Pending[R]) Done() <-chan struct{} { return p.done }

// Wait returns the state machine's result for the command once it was
// committed and applied on this replica (the leader), or why it was not:
// a *NotLeaderError (not appended; retry on the leader), ErrUnknownOutcome
// (it may or may not commit: leadership was lost, or ctx ended first, in
// which case the error also wraps ctx's error), ErrClosed or ErrFailed.
func (p *Pending[R]) Wait(ctx context.Context) (R, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		var zero R
		return zero, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	}
}
