package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// ErrLastVoter is returned by Leave on the group's only voter: removing it
// would leave no group to hold the metadata.
var ErrLastVoter = errors.New("meta: this node is the only voter")

// TransferLeadership hands the group's leadership to another voter when
// this node leads, so that the group need not wait for an election timeout
// after this node stops. It reports whether leadership moved; a node that
// does not lead, or leads alone, transfers nothing.
func (m *Meta) TransferLeadership(ctx context.Context) (bool, error) {
	if !m.IsLeader() {
		return false, nil
	}
	voters, err := m.Voters(ctx)
	if err != nil {
		return false, err
	}
	if !slices.ContainsFunc(voters, func(s Server) bool { return s.ID != m.cfg.NodeID }) {
		return false, nil
	}
	if err := m.await(ctx, m.raft.LeadershipTransfer()); err != nil {
		return false, fmt.Errorf("meta: leadership transfer: %w", mapRaftErr(err))
	}
	return true, nil
}

// Leave removes this node from the group for good (a node being retired):
// leadership moves first when it leads, then the new leader removes it.
// The node's copy of the metadata stops being updated. To come back, the
// node must start with an empty data directory and join again.
func (m *Meta) Leave(ctx context.Context) error {
	voters, err := m.Voters(ctx)
	if err != nil {
		return err
	}
	others := slices.ContainsFunc(voters, func(s Server) bool { return s.ID != m.cfg.NodeID })
	if slices.ContainsFunc(voters, func(s Server) bool { return s.ID == m.cfg.NodeID }) && !others {
		return ErrLastVoter
	}
	if _, err := m.TransferLeadership(ctx); err != nil {
		return err
	}
	return m.RemoveServer(ctx, m.cfg.NodeID)
}
