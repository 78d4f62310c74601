package replication

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestMembershipTrace runs a group through the membership changes a
// migration makes (add a learner, let it catch up, promote it, hand it
// leadership, remove the old replica) and the mistakes an owner can make,
// and compares what every replica reports after each step with
// testdata/membership.golden (rewrite with -update and review the diff).
func TestMembershipTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		var trace strings.Builder
		lead := func() *Group[uint64] {
			_, g := c.leaderAmong(openVoters(c)...)
			return g
		}
		step := func(what string, do func() error) {
			t.Helper()
			fmt.Fprintf(&trace, "> %s\n", what)
			if err := do(); err != nil {
				fmt.Fprintf(&trace, "error: %v\n", err)
			}
			settle(t, c)
			describe(&trace, c)
		}
		propose := func(cmds ...string) func() error {
			return func() error { _, err := proposeAll(ctxFor(t, 5*time.Second), lead(), cmds); return err }
		}

		step("bootstrap n1 n2 n3; hand leadership to n1", func() error {
			c.start(ids(3)...)
			if g := lead(); g.ID() != "" && g.e.cfg.NodeID != "n1" {
				return g.TransferLeadership(ctxFor(t, 5*time.Second), "n1")
			}
			return nil
		})
		step("propose a b c", propose("a", "b", "c"))
		step("open n4; add n4 as a learner", func() error {
			c.open("n4", false)
			return lead().AddLearner(ctxFor(t, 5*time.Second), "n4", addr("n4"))
		})
		step("promote n4", func() error { return lead().Promote(ctxFor(t, 5*time.Second), "n4") })
		step("hand leadership to n4", func() error { return lead().TransferLeadership(ctxFor(t, 5*time.Second), "n4") })
		step("remove n1", func() error { return lead().Remove(ctxFor(t, 5*time.Second), "n1") })
		step("propose d e", propose("d", "e"))
		step("open n5; add n5 as a learner", func() error {
			c.open("n5", false)
			return lead().AddLearner(ctxFor(t, 5*time.Second), "n5", addr("n5"))
		})
		step("remove n5", func() error { return lead().Remove(ctxFor(t, 5*time.Second), "n5") })
		step("promote n9, not a member", func() error { return lead().Promote(ctxFor(t, 5*time.Second), "n9") })
		step("add a learner on a follower (n2)", func() error {
			return c.groups["n2"].AddLearner(ctxFor(t, 5*time.Second), "n6", addr("n6"))
		})
		step("hand leadership to n5, a removed learner", func() error {
			return lead().TransferLeadership(ctxFor(t, 5*time.Second), "n5")
		})

		golden := filepath.Join("testdata", "membership.golden")
		if *update {
			if err := os.WriteFile(golden, []byte(trace.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got := trace.String(); got != string(want) {
			t.Errorf("trace differs from %s (rerun with -update to accept):\n%s", golden, got)
		}
	})
}

// openVoters are the open replicas that are voters in their own view.
func openVoters(c *cluster) []string {
	var out []string
	for id, g := range c.groups {
		if r := g.role(); r == RoleLeader || r == RoleFollower || r == RoleCandidate {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// settle waits until one leader is agreed on by the voters, every member
// replica sees the leader's configuration and has applied what the
// leader applied, and replicas outside the configuration see themselves
// so.
func settle(t *testing.T, c *cluster) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		why := unsettled(c)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group has not settled after 10s: %s", why)
		}
		time.Sleep(time.Millisecond) // lint:sleep-ok polls in a synctest bubble's fake time
	}
}

// unsettled says why the group has not settled ("" once it has).
func unsettled(c *cluster) string {
	voters := openVoters(c)
	if len(voters) == 0 {
		return "no open voter"
	}
	var lead *Group[uint64]
	for _, id := range voters {
		if c.groups[id].IsLeader() {
			lead = c.groups[id]
		}
	}
	if lead == nil {
		return "no leader"
	}
	conf := lead.Members()
	in := map[string]bool{}
	for _, m := range conf {
		in[m.ID] = true
	}
	want := len(c.fsms[lead.e.cfg.NodeID].cmds())
	for id, g := range c.groups {
		if !in[id] {
			// A removed replica may never learn it was removed: the
			// leader sends it one last append and stops, and if that
			// append does not land (about once in 40 runs here) the
			// replica keeps its old view. Its owner closes it by the
			// group's record, not by Raft. It must not lead, though.
			if r := g.role(); r == RoleLeader {
				return fmt.Sprintf("%s, removed, leads", id)
			}
			continue
		}
		// Every member holds the leader's whole log, not just its
		// commands: a member the leader has not yet brought up to its
		// own entries (its no-op after an election) would miss a later
		// change that removes it, since the leader sends a removed
		// server one last append and stops, and keep seeing itself a
		// member (the trace failed so about once in 15 runs).
		switch {
		case !slices.Equal(g.Members(), conf):
			return fmt.Sprintf("%s sees members %v, the leader %v", id, g.Members(), conf)
		case g.Leader().ID != lead.e.cfg.NodeID:
			return fmt.Sprintf("%s follows %q", id, g.Leader().ID)
		case len(c.fsms[id].cmds()) != want:
			return fmt.Sprintf("%s applied %d commands of %d", id, len(c.fsms[id].cmds()), want)
		case g.raft.LastIndex() != lead.raft.LastIndex():
			return fmt.Sprintf("%s holds the log to %d, the leader to %d", id, g.raft.LastIndex(), lead.raft.LastIndex())
		}
	}
	return ""
}

// describe writes what each replica reports: its role, the leader it
// knows, the members it sees and the commands it holds.
func describe(w *strings.Builder, c *cluster) {
	var nodes []string
	for id := range c.groups {
		nodes = append(nodes, id)
	}
	slices.Sort(nodes)
	in := map[string]bool{}
	if _, lead := c.leaderAmong(openVoters(c)...); lead != nil {
		for _, m := range lead.Members() {
			in[m.ID] = true
		}
	}
	for _, id := range nodes {
		g := c.groups[id]
		if !in[id] && g.role() != RoleShutdown {
			// Whether it learned of its removal is timing (see
			// unsettled); what it holds is not.
			fmt.Fprintf(w, "  %s removed   cmds=%s\n", id, strings.Join(c.fsms[id].cmds(), ""))
			continue
		}
		var ms []string
		for _, m := range g.Members() {
			kind := "voter"
			if !m.Voter {
				kind = "learner"
			}
			ms = append(ms, m.ID+":"+kind)
		}
		// A replica outside the group hears from no leader and forgets
		// it after a heartbeat timeout: when is a matter of timing.
		leader := g.Leader().ID
		if leader == "" || g.role() == RoleNone {
			leader = "-"
		}
		fmt.Fprintf(w, "  %s %-9s leader=%s members=[%s] cmds=%s\n", id, g.role(), leader, strings.Join(ms, " "),
			strings.Join(c.fsms[id].cmds(), ""))
	}
}
