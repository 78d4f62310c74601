package meta

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A node's copy of the metadata starts behind the group: Raft restores it
// from the last snapshot, and applies the later entries only once a leader
// tells it the commit index. Until then the copy may name this node the
// home of a group that moved away while it was down (a handover, a
// failover), or know nothing of a group created since. Who acts on the
// copy for sequenced groups (the replica set opening groups, an access
// node routing publishes, an operator's move looking the group up) waits
// for the copy to catch up first: this node has asked a leader for its
// read index (opReadIndex, over the forwarding path; or run the barrier
// itself, leading) and applied up to it.

// catchUpAttempt bounds one attempt to catch up (a leader that stopped
// answering is asked again after it; leaderDo finds the next one).
const catchUpAttempt = 10 * time.Second

// CaughtUp returns a channel closed once this node's copy has caught up
// with the group since Open: it heard from a leader (or led) and applied
// every entry that leader had committed when asked. It stays closed.
func (m *Meta) CaughtUp() <-chan struct{} { return m.ready }

// IsCaughtUp reports whether CaughtUp is closed.
func (m *Meta) IsCaughtUp() bool {
	select {
	case <-m.ready:
		return true
	default:
		return false
	}
}

// WaitCaughtUp blocks until the copy caught up (CaughtUp), ctx ends or the
// Meta closes.
func (m *Meta) WaitCaughtUp(ctx context.Context) error {
	select {
	case <-m.ready:
		return nil
	case <-m.group.Context().Done():
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("meta: wait for the copy to catch up: %w", ctx.Err())
	}
}

// ReadIndex returns the leader's read index: after a barrier of its own
// term committed (which proves it still leads) and every earlier entry
// applied, the index of the last command its copy applied. A copy that
// has applied that index has seen every command committed before the call
// began. It asks the leader through the forwarding path (or runs the
// barrier itself, leading) and retries until ctx ends.
func (m *Meta) ReadIndex(ctx context.Context) (uint64, error) {
	resp, err := m.leaderDo(ctx, request{Op: opReadIndex}, true)
	if err != nil {
		return 0, fmt.Errorf("meta: read index: %w", err)
	}
	return resp.Index, nil
}

// ReadBarrier waits until this node's copy has applied the leader's read
// index: a State read after it returns is linearizable (it reflects every
// command committed before the call). It fails, rather than answering
// from a copy that may lag, when no leader answers before ctx ends.
func (m *Meta) ReadBarrier(ctx context.Context) error {
	idx, err := m.ReadIndex(ctx)
	if err != nil {
		return err
	}
	return m.Wait(ctx, idx)
}

// readIndexLocal is ReadIndex on the leader.
func (m *Meta) readIndexLocal(ctx context.Context) (uint64, error) {
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return 0, err
	}
	if err := m.await(ctx, m.raft.Barrier(timeout)); err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		}
		return 0, mapRaftErr(err)
	}
	return m.machine.current().Applied(), nil
}

// catchUpRetry is the pause after an attempt that failed at once.
const catchUpRetry = time.Second

// catchUp runs ReadBarrier until it succeeds once, then closes ready.
func (m *Meta) catchUp(ctx context.Context) {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, catchUpAttempt)
		idx, err := m.ReadIndex(actx)
		via := "read_index"
		if err != nil && strings.Contains(err.Error(), fmt.Sprintf("unknown op %q", opReadIndex)) {
			// A leader of an earlier version (its answer to an unknown
			// op): fall back to what a follower learns from it.
			via = "leader_contact"
			err = m.catchUpFromContact(actx, start)
		} else if err == nil {
			err = m.Wait(actx, idx)
		}
		cancel()
		if err == nil {
			// Logged before ready closes, so whoever waited on it finds
			// the line written.
			m.logger.Info("meta: this node's metadata copy caught up with the group",
				"applied", m.machine.current().Applied(), "via", via, "read_index", idx, "took", time.Since(start).Round(time.Millisecond))
			close(m.ready)
			return
		}
		if ctx.Err() != nil {
			return
		}
		m.logger.Warn("meta: this node's metadata copy has not caught up yet (no leader answered); sequenced groups wait",
			"attempt", attempt, "waited", time.Since(start).Round(time.Millisecond), "err", err)
		if sleepCtx(ctx, catchUpRetry) != nil {
			return
		}
	}
}

// catchUpFromContact is the catch-up with a leader that does not know
// opReadIndex (a rolling upgrade): this node heard from a leader since
// start, and Raft applied the commit index it learnt. Weaker than the read
// index: a follower far behind learns a commit index capped at the
// entries it received so far, so it may count as caught up a batch of
// entries early.
func (m *Meta) catchUpFromContact(ctx context.Context, start time.Time) error {
	const poll = 10 * time.Millisecond
	for !m.IsLeader() && m.raft.LastContact().Before(start) {
		if err := sleepCtx(ctx, poll); err != nil {
			return fmt.Errorf("meta: no contact with a leader: %w", err)
		}
	}
	commit := m.raft.CommitIndex()
	for m.raft.AppliedIndex() < commit {
		if err := sleepCtx(ctx, poll); err != nil {
			return fmt.Errorf("meta: apply up to the commit index %d: %w", commit, err)
		}
	}
	return nil
}
