package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/raft"
)

// Bootstrap starts a new group with voters as its members. Every initial
// voter calls it with the same list (this replica must be in it); other
// replicas join later through AddLearner. A replica that already has state
// returns ErrBootstrapped, so calling Bootstrap again after a restart is
// harmless.
func (g *Group[R]) Bootstrap(ctx context.Context, voters []Member) error {
	var conf raft.Configuration
	ids, addrs := map[string]bool{}, map[string]bool{}
	self := false
	for _, m := range voters {
		if err := validMember(m); err != nil {
			return err
		}
		if ids[m.ID] || addrs[m.Addr] {
			return fmt.Errorf("%w: group %s: member %s listed twice", ErrConfig, g.id, m.ID)
		}
		ids[m.ID], addrs[m.Addr] = true, true
		self = self || m.ID == g.e.cfg.NodeID
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raftAddress(m.ID, m.Addr)})
	}
	if !self {
		return fmt.Errorf("%w: group %s: bootstrap voters do not include this node (%s)", ErrConfig, g.id, g.e.cfg.NodeID)
	}
	err := g.await(ctx, g.raft.BootstrapCluster(conf))
	if errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("%w: group %s", ErrBootstrapped, g.id)
	}
	return g.wrap("bootstrap", err)
}

func validMember(m Member) error {
	if err := validNodeID(m.ID); err != nil {
		return err
	}
	if m.Addr == "" || strings.Contains(m.Addr, "@") {
		return fmt.Errorf("%w: member %s has address %q", ErrConfig, m.ID, m.Addr)
	}
	return nil
}

// AddLearner adds node id (at cluster address addr) as a learner: it
// receives the log (or a snapshot, when the log it needs was compacted)
// without voting or counting for commits. Leader only. The learner's node
// must have opened the group (OpenGroup, without Bootstrap) for it to
// catch up; until then the leader retries.
func (g *Group[R]) AddLearner(ctx context.Context, id, addr string) error {
	if err := validMember(Member{ID: id, Addr: addr}); err != nil {
		return err
	}
	return g.wrap("add learner "+id, g.await(ctx, g.raft.AddNonvoter(raft.ServerID(id), raftAddress(id, addr), 0, 0)))
}

// Promote makes learner id a voter. Leader only. Promote a learner once it
// has caught up (its Stats().Applied reached the leader's commit index):
// a voter that lags makes commits wait for the others.
func (g *Group[R]) Promote(ctx context.Context, id string) error {
	m, ok := g.member(id)
	if !ok {
		return fmt.Errorf("%w: group %s: %s is not a member", ErrConfig, g.id, id)
	}
	if m.Voter {
		return nil
	}
	return g.wrap("promote "+id, g.await(ctx, g.raft.AddVoter(raft.ServerID(id), raftAddress(id, m.Addr), 0, 0)))
}

// Remove removes member id (a voter or a learner). Leader only. A removed
// replica keeps running with RoleNone until its node closes it (or deletes
// it with Engine.Delete). Removing the leader itself makes it step down once
// the change commits.
func (g *Group[R]) Remove(ctx context.Context, id string) error {
	if _, ok := g.member(id); !ok {
		return nil
	}
	return g.wrap("remove "+id, g.await(ctx, g.raft.RemoveServer(raft.ServerID(id), 0, 0)))
}

// TransferLeadership hands leadership to voter to (any up-to-date voter
// when to is empty): the leader stops taking commands, brings the target's
// log up to date and tells it to stand for election at once. It returns
// when the target was told; the new leader shows in Leadership. Leader
// only.
func (g *Group[R]) TransferLeadership(ctx context.Context, to string) error {
	if to == "" {
		return g.wrap("transfer leadership", g.await(ctx, g.raft.LeadershipTransfer()))
	}
	m, ok := g.member(to)
	if !ok || !m.Voter {
		return fmt.Errorf("%w: group %s: %s is not a voter", ErrConfig, g.id, to)
	}
	return g.wrap("transfer leadership to "+to, g.await(ctx, g.raft.LeadershipTransferToServer(raft.ServerID(to), raftAddress(to, m.Addr))))
}

// Snapshot makes this replica take a snapshot now (Raft also takes one
// every Config.SnapshotThreshold entries) and compact its log.
func (g *Group[R]) Snapshot(ctx context.Context) error {
	return g.wrap("snapshot", g.await(ctx, g.raft.Snapshot()))
}

func (g *Group[R]) member(id string) (Member, bool) {
	for _, m := range g.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// await waits for a Raft future or ctx. The goroutine that waits on the
// future counts in awaitWG, which Close waits for before it shuts Raft down
// (Raft answers every future it holds while it runs).
func (g *Group[R]) await(ctx context.Context, f raft.Future) error {
	g.mu.Lock()
	if g.mu.closed {
		err := g.closedLocked()
		g.mu.Unlock()
		return err
	}
	g.awaitWG.Add(1)
	g.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer g.awaitWG.Done()
		done <- f.Error()
	}()
	select {
	case err := <-done:
		if err != nil {
			return g.mapErr(err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	}
}

func (g *Group[R]) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		return err
	}
	return fmt.Errorf("replication: group %s: %s: %w", g.id, op, err)
}
