package replicas

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// startKeeper runs r's keeper on the set's group.
func (s *Set) startKeeper(r *Replica) {
	ctx, cancel := context.WithCancel(s.group.Context())
	r.cancel, r.done = cancel, make(chan struct{})
	if !s.group.Go(func(context.Context) {
		defer close(r.done)
		s.keep(ctx, r)
	}) {
		close(r.done)
	}
}

// keep does the leader's work for r until ctx ends: it records this node
// as the group's home after an election (the record named another node),
// and proposes retention ticks.
func (s *Set) keep(ctx context.Context, r *Replica) {
	tick := s.clock.NewTimer(s.cfg.RetentionInterval)
	defer tick.Stop()
	retry := s.clock.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	handedOver := false
	for {
		ch := s.cfg.Meta.Changed()
		rec, ok := s.record(r.ID)
		if ok {
			sawLeader(r, rec, r.Rep.Leader())
		}
		// A replica kept open for a handover (Keep) while the record names
		// other nodes claims nothing: the group is the target's.
		if ok && r.Rep.IsLeader() && rec.Home != s.cfg.NodeID && slices.Contains(rec.Voters, s.cfg.NodeID) {
			switch {
			case handsOver(rec, s.cfg.NodeID) && !handedOver && !r.noHandOver.Load():
				// The group's first election chose another replica than
				// the home it was placed on: hand the lead over (once),
				// unless a migration brought the lead here.
				handedOver = true
				if s.handOver(ctx, r, rec.Home) {
					continue
				}
				r.noHandOver.Store(true)
				fallthrough
			default:
				if !s.claim(ctx, rec) {
					retry.Reset(claimRetry)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case l := <-r.Rep.Leadership():
			if rec, ok := s.record(r.ID); ok {
				sawLeader(r, rec, l)
			}
		case <-ch:
		case <-retry.C():
		case <-tick.C():
			s.retain(ctx, r)
			tick.Reset(s.cfg.RetentionInterval)
		}
	}
}

// sawLeader notes that this replica saw l lead the group: once the
// record's home has led it, the lead that comes here later came from the
// home (a migration's transfer, a failover), never from the group's first
// election, so it is not handed back. The record alone cannot tell: this
// node's copy may not show the migration's decision yet when the transfer
// makes it the leader (the decision and the transfer reach it by different
// paths), and handing the lead back then would leave the old home leading
// and its migration waiting for a record that names the target.
func sawLeader(r *Replica, rec fsm.Group, l replication.Leader) {
	if l.ID != "" && !l.Local && l.ID == rec.Home {
		r.noHandOver.Store(true)
	}
}

// handsOver reports whether node, leading group rec, is to hand the lead
// to the home the group was placed on: the group's first election chose
// node, and no migration brought the lead here (as far as rec shows; the
// keeper also checks that the home never led, sawLeader).
func handsOver(rec fsm.Group, node string) bool {
	return rec.Home != node && rec.HomeReason == fsm.ReasonCreated && (rec.Desired == nil || rec.Desired.Home != node)
}

// HandingOver reports whether this node's replica of group id leads it
// only until it hands the lead to the home the group was placed on (a new
// group's first election chose it), and names that home. The publish
// path's home side sends batches there rather than submit them here: a
// command in flight when the lead moves has an unknown outcome, and the
// access node would have to drop its QoS 0 publishes. False once the hand
// over failed or this replica saw the home lead (this node then records
// itself as the home).
func (s *Set) HandingOver(id string) (home string, ok bool) {
	r := s.Get(id)
	if r == nil || r.noHandOver.Load() || !r.Rep.IsLeader() {
		return "", false
	}
	rec, ok := s.record(id)
	if !ok || !handsOver(rec, s.cfg.NodeID) {
		return "", false
	}
	return rec.Home, true
}

// transferer is a replica that can hand its lead to another voter
// (*replication.Group).
type transferer interface {
	TransferLeadership(ctx context.Context, to string) error
}

var _ transferer = (*replication.Group[sequencer.Result])(nil)

// handOver transfers r's leadership to home, the node the group was
// placed on; it reports whether it did.
func (s *Set) handOver(ctx context.Context, r *Replica, home string) bool {
	g, ok := r.Rep.(transferer)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	if err := g.TransferLeadership(ctx, home); err != nil {
		s.log.Info("handing a new group's lead to its home failed; this node becomes the home", "group", r.ID, "home", home, "err", err)
		return false
	}
	s.metrics.handovers.Inc()
	return true
}

// claimAttempt bounds one claim. A claim commits in a metadata round
// trip; one whose forwarded proposal or answer was lost is tried again
// (claimRetry later, with the record as this node's copy then has it) well
// within a migration's wait for the target's claim (its step timeout,
// 30 s), rather than once per 10 s. A retry of a claim that did commit
// conflicts on the epoch and brings the record naming this node.
const claimAttempt = 3 * time.Second

// claim records this node, the group's leader, as its home. It reports
// false when it should be tried again later (counted); a conflict (another
// change got there first, or an earlier attempt whose answer was lost) is
// not retried here: the record it brings, which this node's copy has
// applied by then, is read again at the next turn of the loop.
func (s *Set) claim(ctx context.Context, rec fsm.Group) bool {
	ctx, cancel := context.WithTimeout(ctx, claimAttempt)
	defer cancel()
	got, err := s.cfg.Meta.SetGroupHome(ctx, fsm.HomeChange{
		Group: rec.ID, Home: s.cfg.NodeID, Epoch: rec.Epoch + 1, Reason: claimReason(rec, s.cfg.NodeID), At: s.clock.Now(),
	})
	switch {
	case err == nil:
		s.metrics.homeClaims.Inc()
		s.log.Info("became the home of a placement group", "group", rec.ID, "previous", rec.Home, "epoch", got.Epoch)
		return true
	case errors.Is(err, fsm.ErrConflict):
		return true
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return true
	}
	s.metrics.claimFailures.Inc()
	s.log.Warn("recording this node as a group's home failed; trying again", "group", rec.ID, "in", claimRetry, "err", err)
	return false
}

// claimReason is why the lead came to node: a migration's when a pending
// decision names it home (the old home handed the lead over), else a
// failover.
func claimReason(rec fsm.Group, node string) fsm.Reason {
	d := rec.Desired
	if d == nil || d.Home != node {
		return fsm.ReasonFailover
	}
	switch d.Reason {
	case fsm.ReasonViolation:
		return fsm.ReasonMigration
	case fsm.ReasonOverload:
		return fsm.ReasonRebalance
	}
	return d.Reason
}

// retain proposes a retention tick with the record's bounds, on the
// leader. A tick is a command of the group's log, so every replica
// removes the same segments at the same (the leader's) time.
func (s *Set) retain(ctx context.Context, r *Replica) {
	if !r.Rep.IsLeader() {
		return
	}
	rec, ok := s.cfg.Meta.State().Group(r.ID)
	if !ok || (rec.Retention.Messages <= 0 && rec.Retention.Duration <= 0) {
		return
	}
	cmd, err := sequencer.EncodeCommand(sequencer.RetentionCommand(topiclog.Retention{
		MaxRecordsPerTopic: uint64(max(rec.Retention.Messages, 0)), MaxAge: time.Duration(rec.Retention.Duration),
	}))
	if err != nil {
		s.log.Error("encoding a retention tick", "group", r.ID, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	res, err := r.Rep.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("retention tick failed", "group", r.ID, "err", err)
		}
		return
	}
	if res.Removed.Records > 0 {
		s.metrics.retentionRemoved.Add(float64(res.Removed.Records))
		s.log.Debug("retention removed records", "group", r.ID, "records", res.Removed.Records,
			"segments", res.Removed.Segments, "first_seq", res.Removed.FirstSeq)
	}
}
