package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/cluster/sequenced"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/migration"
	"github.com/sextantmq/sextant/internal/placement/manager"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// startMigrations builds the migration executor over the group replicas
// and the home side of the publish path: the receiving side of handovers
// (MethodMigrate on the cluster layer) and the driver, which runs on the
// node's group (it stops before the replicas close).
func (n *Node) startMigrations(cp *clusterParts, home *sequenced.Home) error {
	recv := migration.NewReceiver(migration.ReceiverConfig{NodeID: n.cfg.NodeID, Dir: n.groupsDir(), Groups: cp.groups,
		Log: topiclog.Options{SegmentBytes: n.opts.GroupSegmentBytes}, Clock: n.clock, Logger: n.log.With("subsystem", "migration")})
	dc := migration.Config{
		NodeID: n.cfg.NodeID, Workers: n.cfg.PlacementExecutors, Meta: cp.meta, Replicas: cp.groups, Home: home,
		Dir:   filepath.Join(n.cfg.DataDir, "migration"),
		Clock: n.clock, Registerer: n.metrics.Registry, Log: n.log.With("subsystem", "migration"),
	}
	if cp.layer != nil {
		if err := cp.layer.Handle(migration.MethodMigrate, recv.Serve); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		if err := cp.layer.Handle(methodMigrations, n.serveMigrations); err != nil { // migrationlist.go
			return fmt.Errorf("node: %w", err)
		}
		dc.Peers = cp.layer.Peers()
	}
	d, err := migration.New(dc)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	cp.migrations, cp.receiver = d, recv
	n.group.Go(d.Run)
	return nil
}

// migrator is the admin API's view of the migrations.
type migrator struct{ n *Node }

var _ adminapi.Migrator = migrator{}

// Move records an operator's decision to move req.Topic's group to req.To
// (through the metadata leader, as the placement manager's Move does) and
// waits until the group's record names the new home with the decided
// replicas and no decision pending.
func (m migrator) Move(ctx context.Context, req adminapi.MoveRequest, timeout time.Duration) (adminapi.MoveResult, error) {
	return m.n.MoveGroup(ctx, req.Topic, req.To, timeout)
}

// MoveGroup moves the group of topic (a sequenced topic or a group id) to
// node to, waiting up to timeout for the move to be done.
func (n *Node) MoveGroup(ctx context.Context, topic, to string, timeout time.Duration) (adminapi.MoveResult, error) {
	cp := n.cluster
	if cp == nil || cp.meta == nil {
		return adminapi.MoveResult{}, errors.New("node: not started")
	}
	start := n.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The node's placement manager (its reports give the distances that
	// choose a replicated group's new voters); a bare one before it is
	// built.
	var mgr *manager.Manager
	if cp.placement != nil {
		mgr = cp.placement.manager
	} else {
		var err error
		if mgr, err = manager.New(manager.Config{Clock: n.clock}, cp.meta); err != nil {
			return adminapi.MoveResult{}, err
		}
	}
	// Look the group up in a copy that has caught up with the metadata
	// leader: a copy that lags (this node restarted behind, or a group
	// created elsewhere just now) would answer 404 for a group that
	// exists, or 409 for a record whose epoch it does not know yet.
	bctx, bcancel := context.WithTimeout(ctx, metaBarrierTimeout)
	err := cp.meta.ReadBarrier(bctx)
	bcancel()
	if err != nil {
		return adminapi.MoveResult{}, fmt.Errorf("%w: cannot look %q up in a metadata copy caught up with the leader: %w", adminapi.ErrMoveUnavailable, topic, err)
	}
	before, _, _ := groupOf(cp.meta.State(), topic)
	rec, err := mgr.Move(ctx, topic, to)
	switch {
	case errors.Is(err, manager.ErrUnknown):
		return adminapi.MoveResult{}, fmt.Errorf("%w: %w", adminapi.ErrMoveUnknown, err)
	case errors.Is(err, fsm.ErrConflict):
		return adminapi.MoveResult{}, fmt.Errorf("%w: %w", adminapi.ErrMoveConflict, err)
	case err != nil:
		return adminapi.MoveResult{}, err
	}
	want := rec.Desired // nil: the group is there already
	if want != nil {
		// This node's copy may lag the leader that recorded the decision.
		if err := cp.meta.Wait(ctx, want.Index); err != nil {
			return adminapi.MoveResult{}, fmt.Errorf("%w: %w", adminapi.ErrMoveTimeout, err)
		}
	}
	for {
		ch := cp.meta.Changed()
		g, ok := cp.meta.State().Group(rec.ID)
		if !ok {
			return adminapi.MoveResult{}, fmt.Errorf("%w: group %s was deleted", adminapi.ErrMoveConflict, rec.ID)
		}
		switch {
		case g.Desired == nil && g.Home == to:
			if g.HandoverFrom != "" {
				// Handed over: the record names the target from the
				// switch's commit, before it has the log; done when it
				// serves.
				if err := n.awaitServing(ctx, to, g.ID); err != nil {
					return adminapi.MoveResult{}, fmt.Errorf("%w: %w", adminapi.ErrMoveTimeout, err)
				}
			}
			return adminapi.MoveResult{Group: g.ID, From: before.Home, Home: g.Home, Voters: g.Voters, Epoch: g.Epoch,
				Seconds: n.clock.Now().Sub(start).Seconds()}, nil
		case want != nil && (g.Desired == nil || g.Desired.Index != want.Index):
			return adminapi.MoveResult{}, fmt.Errorf("%w: the decision was replaced or withdrawn (home %s)", adminapi.ErrMoveConflict, g.Home)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return adminapi.MoveResult{}, fmt.Errorf("%w: after %v the group's home is %s (decided: %s); see GET /v1/migrations on %s",
				adminapi.ErrMoveTimeout, timeout, g.Home, to, g.Home)
		}
	}
}

// awaitServing waits until node serves group (this node: its replica
// open and leading).
func (n *Node) awaitServing(ctx context.Context, node, group string) error {
	cp := n.cluster
	if node != n.cfg.NodeID {
		var peers migration.Caller
		if cp.layer != nil {
			peers = cp.layer.Peers()
		}
		return migration.AwaitServing(ctx, peers, n.clock, node, group)
	}
	for {
		ch := cp.groups.Changed()
		if r := cp.groups.Get(group); r != nil && r.Rep.IsLeader() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("node: waiting to serve %s: %w", group, ctx.Err())
		}
	}
}

// groupOf is the record of topic's group (or of the group named topic).
func groupOf(st fsm.State, topic string) (fsm.Group, string, bool) {
	if g, ok := st.Group(topic); ok {
		return g, g.ID, true
	}
	id, _, ok := st.GroupFor(topic)
	if !ok {
		return fsm.Group{}, "", false
	}
	g, ok := st.Group(id)
	return g, id, ok
}

// Migrations exposes the migration executor (nil before Start or for a
// node without a cluster part), for tests.
func (n *Node) Migrations() *migration.Driver {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.migrations
}
