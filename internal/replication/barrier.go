package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Barrier returns once an entry of its own has committed through a
// majority and every entry before it is applied to the state machine. So a
// read of the state machine after Barrier sees every command acknowledged
// before Barrier was called: reads done that way are linearizable. It
// costs a log write and a round trip to a majority, and only the leader
// can do it (a *NotLeaderError elsewhere, or when leadership is lost
// meanwhile). ctx bounds the wait.
func (g *Group[R]) Barrier(ctx context.Context) error {
	if !g.IsLeader() {
		return &NotLeaderError{Group: g.id, Leader: g.Leader()}
	}
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			return ctx.Err()
		}
	}
	fut := g.raft.Barrier(timeout)
	done := make(chan error, 1)
	go func() { done <- fut.Error() }() // ends by the timeout, or when Raft shuts down
	select {
	case err := <-done:
		switch {
		case err == nil:
			return nil
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			return &NotLeaderError{Group: g.id, Leader: g.Leader()}
		case errors.Is(err, raft.ErrRaftShutdown):
			return ErrClosed
		}
		return fmt.Errorf("replication: group %s: barrier: %w", g.id, err)
	case <-ctx.Done():
		return ctx.Err()
	}
}
