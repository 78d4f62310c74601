package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestReplicasApplyIdentically: with 3 and 5 replicas, commands proposed
// concurrently by several pipelined publishers commit, every replica
// applies the same commands in the same order, each publisher's commands
// keep their order, and each result is the command's position on every
// replica.
func TestReplicasApplyIdentically(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, time.Millisecond)
				c.start(ids(n)...)
				_, lead := c.leader()
				results := publishConcurrently(t, lead, 8, 40)
				log := c.converge()
				if len(log) != 8*40 {
					t.Fatalf("%d commands applied, want %d", len(log), 8*40)
				}
				checkPublishers(t, log, results)
				var batches []int
				for _, f := range c.fsms {
					f.mu.Lock()
					batches = append(batches, slices.Max(f.mu.batches))
					f.mu.Unlock()
				}
				t.Logf("largest state machine batch per replica: %v", batches)
				var leaders, followers float64
				for id := range c.groups {
					leaders += c.counter(id, "sextant_replication_groups", "role", string(RoleLeader))
					followers += c.counter(id, "sextant_replication_groups", "role", string(RoleFollower))
				}
				if leaders != 1 || followers != float64(n-1) {
					t.Errorf("groups by role: %v leaders, %v followers", leaders, followers)
				}
			})
		})
	}
}

// TestConcurrentProposalsShareLogWrites: proposals submitted together are
// appended to the leader's log in shared writes (one fsync each) and
// applied in shared batches.
func TestConcurrentProposalsShareLogWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start(ids(3)...)
		leadID, lead := c.leader()
		writes0, entries0 := c.counter(leadID, "sextant_replication_log_writes_total"), c.counter(leadID, "sextant_replication_log_entries_written_total")
		var cmds []string
		for i := range 512 {
			cmds = append(cmds, fmt.Sprintf("c%d", i))
		}
		if _, err := proposeAll(ctxFor(t, 10*time.Second), lead, cmds); err != nil {
			t.Fatal(err)
		}
		writes := c.counter(leadID, "sextant_replication_log_writes_total") - writes0
		entries := c.counter(leadID, "sextant_replication_log_entries_written_total") - entries0
		t.Logf("leader: %v entries in %v log writes (%.1f per fsync)", entries, writes, entries/writes)
		if entries < 512 || entries/writes < 8 {
			t.Errorf("%v entries in %v writes: proposals did not share log writes", entries, writes)
		}
	})
}

// TestCommitNeedsMajority: a leader cut off from both followers cannot
// commit; the followers elect a new leader that does; after the heal the
// old leader catches up, nothing acknowledged is lost and the command the
// cut-off leader could not commit is gone.
func TestCommitNeedsMajority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start(ids(3)...)
		oldID, old := c.leader()
		acked, err := proposeAll(ctxFor(t, 5*time.Second), old, []string{"a1", "a2", "a3"})
		if err != nil {
			t.Fatal(err)
		}
		for id := range c.groups {
			if id != oldID {
				c.nw.Partition(host(oldID), host(id))
			}
		}
		short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = old.Propose(short, []byte("lost"))
		if err == nil {
			t.Fatal("a leader cut off from its followers committed a command")
		}
		if !errIs(err, ErrUnknownOutcome, ErrNotLeader) {
			t.Errorf("cut-off leader's proposal: %v", err)
		}
		t.Logf("cut-off leader's proposal failed: %v", err)

		var next *Group[uint64]
		waitFor(t, 10*time.Second, "a new leader among the followers", func() bool {
			for id, g := range c.groups {
				if id != oldID && g.IsLeader() {
					next = g
					return true
				}
			}
			return false
		})
		res, err := proposeAll(ctxFor(t, 5*time.Second), next, []string{"b1", "b2"})
		if err != nil {
			t.Fatal(err)
		}
		if res[0] != acked[2]+1 {
			t.Errorf("first command of the new leader at position %d, want %d", res[0], acked[2]+1)
		}
		if _, err := old.Propose(ctxFor(t, time.Second), []byte("x")); !errors.Is(err, ErrNotLeader) {
			t.Errorf("proposal to the deposed leader: %v", err)
		}
		c.nw.HealAll()
		log := c.converge()
		if want := []string{"a1", "a2", "a3", "b1", "b2"}; !slices.Equal(log, want) {
			t.Errorf("log %v, want %v", log, want)
		}
	})
}

// TestLeadershipTransfer: leadership moves to the named voter, the old
// leader reports the new one, Leadership notifies both, and the new
// leader commits.
func TestLeadershipTransfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start(ids(3)...)
		oldID, old := c.leader()
		if _, err := old.Propose(ctxFor(t, time.Second), []byte("before")); err != nil {
			t.Fatal(err)
		}
		target := "n1"
		if oldID == target {
			target = "n2"
		}
		drain(old.Leadership())
		if err := old.TransferLeadership(ctxFor(t, 5*time.Second), target); err != nil {
			t.Fatal(err)
		}
		if id, _ := c.leader(); id != target {
			t.Fatalf("leader %s after transfer to %s", id, target)
		}
		waitFor(t, time.Second, "the old leader is notified", func() bool {
			select {
			case l := <-old.Leadership():
				return l.ID == target && !l.Local
			default:
				return false
			}
		})
		other := "n3"
		if oldID == other || target == other {
			other = "n2"
			if oldID == other || target == other {
				other = "n1"
			}
		}
		if err := old.TransferLeadership(ctxFor(t, time.Second), other); !errors.Is(err, ErrNotLeader) {
			t.Errorf("transfer from a follower: %v", err)
		}
		var nl *NotLeaderError
		if _, err := old.Propose(ctxFor(t, time.Second), []byte("x")); !errors.As(err, &nl) || nl.Leader.ID != target {
			t.Errorf("proposal to the old leader: %v", err)
		}
		if _, err := c.groups[target].Propose(ctxFor(t, time.Second), []byte("after")); err != nil {
			t.Fatal(err)
		}
		if log := c.converge(); !slices.Equal(log, []string{"before", "after"}) {
			t.Errorf("log %v", log)
		}
	})
}

func drain(ch <-chan Leader) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestLearnerCatchesUpBySnapshot: a learner added after the leader
// compacted its log catches up by installing a snapshot, is promoted, a
// voter is removed, and the group commits with the new membership.
func TestLearnerCatchesUpBySnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		// Small segments and 4 KiB commands: compaction deletes whole
		// segments, and raft-wal still serves entries a compaction
		// dropped while they sit in its tail segment.
		c.tune = func(cfg *Config) { cfg.SnapshotThreshold = 1 << 20; cfg.TrailingLogs = 2; cfg.SegmentBytes = 64 << 10 }
		c.start(ids(3)...)
		leadID, lead := c.leader()
		var cmds []string
		pad := strings.Repeat(".", 4<<10)
		for i := range 50 {
			cmds = append(cmds, fmt.Sprintf("c%02d%s", i, pad))
		}
		if _, err := proposeAll(ctxFor(t, 5*time.Second), lead, cmds); err != nil {
			t.Fatal(err)
		}
		if err := lead.Snapshot(ctxFor(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		learner := c.open("n4", false)
		if r := learner.Stats().Role; r != RoleNone {
			t.Errorf("role before being added: %s", r)
		}
		if err := lead.AddLearner(ctxFor(t, 5*time.Second), "n4", addr("n4")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the learner catches up", func() bool {
			st := learner.Stats()
			return st.Applied >= c.fsms[leadID].Applied() && st.CommitIndex >= lead.Stats().CommitIndex
		})
		if c.fsms["n4"].restores() == 0 {
			t.Error("the learner caught up without installing a snapshot")
		}
		if r := learner.Stats().Role; r != RoleLearner {
			t.Errorf("learner's role: %s", r)
		}
		if err := lead.Promote(ctxFor(t, 5*time.Second), "n4"); err != nil {
			t.Fatal(err)
		}
		gone := "n1"
		if leadID == gone {
			gone = "n2"
		}
		if err := lead.Remove(ctxFor(t, 5*time.Second), gone); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the removed replica notices", func() bool { return c.groups[gone].Stats().Role == RoleNone })
		if err := c.groups[gone].Close(); err != nil {
			t.Fatal(err)
		}
		delete(c.groups, gone)
		if err := c.engines[gone].Delete(c.group); err != nil {
			t.Fatal(err)
		}
		want := []Member{}
		for _, id := range ids(4) {
			if id != gone {
				want = append(want, Member{ID: id, Addr: addr(id), Voter: true})
			}
		}
		waitFor(t, 5*time.Second, "every replica sees the new membership", func() bool {
			for _, g := range c.groups {
				if !slices.Equal(g.Members(), want) {
					return false
				}
			}
			return true
		})
		if _, err := lead.Propose(ctxFor(t, 5*time.Second), []byte("after")); err != nil {
			t.Fatal(err)
		}
		if log := c.converge(); len(log) != 51 {
			t.Errorf("%d commands", len(log))
		}
	})
}

// TestRestartAppliesNothingTwice: replicas restarted with their durable
// state machine (the same recorder) are not given an entry they already
// applied, whether or not a snapshot exists; a replica restarted with a
// volatile state machine (a new recorder) rebuilds the same state.
func TestRestartAppliesNothingTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start(ids(3)...)
		leadID, lead := c.leader()
		batch := func(prefix string) {
			t.Helper()
			_, g := c.leader()
			var cmds []string
			for i := range 20 {
				cmds = append(cmds, fmt.Sprintf("%s%02d", prefix, i))
			}
			if _, err := proposeAll(ctxFor(t, 5*time.Second), g, cmds); err != nil {
				t.Fatal(err)
			}
			c.converge()
		}
		batch("a")
		// A follower restarts with no snapshot: Raft replays its whole log.
		var follower string
		for id := range c.groups {
			if id != leadID {
				follower = id
				break
			}
		}
		c.kill(follower)
		c.restart(follower)
		batch("b")
		if c.counter(follower, "sextant_replication_skipped_entries_total") == 0 {
			t.Error("the restarted follower skipped no replayed entry")
		}
		// The leader snapshots, takes more commands, and restarts: Raft
		// does not restore the snapshot (the state machine is ahead of it)
		// and replays the entries after it.
		if err := lead.Snapshot(ctxFor(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		batch("c")
		c.kill(leadID)
		c.restart(leadID)
		batch("d")
		if n := c.fsms[leadID].restores(); n != 0 {
			t.Errorf("the restarted leader restored %d snapshots into a state machine already past them", n)
		}
		// A volatile state machine starts empty and is rebuilt from the
		// snapshot and the log.
		c.kill(leadID)
		c.open(leadID, true)
		batch("e")
		if n := c.fsms[leadID].restores(); n != 1 {
			t.Errorf("a volatile state machine restored %d snapshots, want 1", n)
		}
		if log := c.converge(); len(log) != 100 {
			t.Errorf("%d commands, want 100", len(log))
		}
	})
}

// TestTrailingNoOpsAreGivenAgain: a state machine whose last entries
// changed nothing (deduplicated publishes) reports an applied index behind
// them; the group accepts that, and after a restart gives those entries
// again, and only those.
func TestTrailingNoOpsAreGivenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start(ids(3)...)
		for _, f := range c.fsms {
			f.mu.Lock()
			f.mu.noop = "dup"
			f.mu.Unlock()
		}
		leadID, lead := c.leader()
		if _, err := proposeAll(ctxFor(t, 5*time.Second), lead, []string{"a", "dup-1", "b", "dup-2", "dup-3"}); err != nil {
			t.Fatal(err)
		}
		c.converge()
		var follower string
		for id := range c.groups {
			if id != leadID {
				follower = id
			}
		}
		f := c.fsms[follower]
		f.mu.Lock()
		before := f.mu.noops
		f.mu.Unlock()
		c.kill(follower)
		c.restart(follower)
		if _, err := lead.Propose(ctxFor(t, 5*time.Second), []byte("c")); err != nil {
			t.Fatal(err)
		}
		if log := c.converge(); !slices.Equal(log, []string{"a", "b", "c"}) {
			t.Errorf("log %v", log)
		}
		f.mu.Lock()
		again := f.mu.noops - before
		f.mu.Unlock()
		if again != 2 {
			t.Errorf("the restarted replica was given %d no-op entries again, want the 2 after its last record", again)
		}
	})
}

// TestFailingStateMachineClosesGroup: an Apply error fails the batch's
// proposals with ErrFailed and closes the replica; reopened with a healthy
// state machine holding what was durable, the group resumes.
func TestFailingStateMachineClosesGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start("n1")
		_, g := c.leader()
		if _, err := g.Propose(ctxFor(t, time.Second), []byte("ok")); err != nil {
			t.Fatal(err)
		}
		f := c.fsms["n1"]
		f.mu.Lock()
		f.mu.failAt = f.mu.applied + 1
		f.mu.Unlock()
		_, err := g.Propose(ctxFor(t, time.Second), []byte("boom"))
		if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("proposal the state machine failed: %v", err)
		}
		// Closing runs on its own goroutine after Raft stops: wait until the
		// engine has let go of the group, so it can be opened again.
		waitFor(t, time.Second, "the group closes", func() bool {
			return g.Stats().Role == RoleShutdown && c.engines["n1"].lookup(g.ID()) == nil
		})
		if _, err := g.Submit(ctxFor(t, time.Second), []byte("x")); !errors.Is(err, ErrFailed) {
			t.Errorf("submit after the failure: %v", err)
		}
		if c.counter("n1", "sextant_replication_failures_total") != 1 {
			t.Error("failure not counted")
		}
		f.mu.Lock()
		f.mu.failAt = 0
		f.mu.Unlock()
		g = c.open("n1", false)
		_, g = c.leader()
		if _, err := g.Propose(ctxFor(t, 5*time.Second), []byte("again")); err != nil {
			t.Fatal(err)
		}
		if got := f.cmds(); !slices.Equal(got, []string{"ok", "boom", "again"}) {
			t.Errorf("commands %v", got)
		}
	})
}

// TestLeadershipCoalesces: an owner that does not read Leadership finds
// only the newest leader, and every replaced notification is counted.
func TestLeadershipCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start(ids(3)...)
		leadID, lead := c.leader()
		obs := c.groups["n3"]
		if leadID == "n3" {
			obs = c.groups["n2"]
		}
		for _, to := range []string{"n1", "n2", "n3", "n1"} {
			id, g := c.leader()
			if id == to {
				continue
			}
			if err := g.TransferLeadership(ctxFor(t, 5*time.Second), to); err != nil {
				t.Fatal(err)
			}
			c.leader()
		}
		_ = lead
		synctest.Wait()
		got := <-obs.Leadership()
		if got != obs.Leader() {
			t.Errorf("notification %v, current leader %v", got, obs.Leader())
		}
		select {
		case l := <-obs.Leadership():
			t.Errorf("a second notification waited: %v", l)
		default:
		}
		var coalesced float64
		for id := range c.groups {
			coalesced += c.counter(id, "sextant_replication_leadership_notifications_coalesced_total")
		}
		if coalesced == 0 {
			t.Error("no notification was coalesced")
		}
	})
}
