package membership

import (
	"context"
	"fmt"
)

// Join joins the cluster through addrs after Start, retrying with backoff
// until one of them answers or ctx ends. A node restarted without a join
// list uses it to find the members it knew (see internal/node), in the
// background, so that it serves its clients meanwhile.
func (m *Membership) Join(ctx context.Context, addrs []string) error { return m.join(ctx, addrs) }

// TryJoin contacts addrs once, without retrying or logging, and returns
// how many answered: for a node that checks now and then that gossip has
// not formed in parts (see internal/node). While another join is running
// it returns 0 at once rather than wait for it.
func (m *Membership) TryJoin(addrs []string) (int, error) {
	if !m.joinMu.TryLock() {
		return 0, nil
	}
	defer m.joinMu.Unlock()
	n, err := m.serf.Join(addrs, true)
	if err != nil {
		return n, fmt.Errorf("membership: join %v: %w", addrs, err)
	}
	return n, nil
}

// RemoveFailed marks a failed member as gone for good (an operator removed
// it): the other members stop trying to reconnect to it, and it is
// reaped from the list.
func (m *Membership) RemoveFailed(id string) error {
	if err := m.serf.RemoveFailedNodePrune(id); err != nil {
		return fmt.Errorf("membership: remove %s: %w", id, err)
	}
	return nil
}
