package clustertest

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/migration"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestMigrationLeadReachesTargetBeforeItsCopy: replicated groups (voters
// n1, n2, n3, homed on n2) have their lead moved to n3, which is 200 ms
// from the metadata leader n1 and 20 ms from n2: the old home's transfer
// makes n3 the leader before n3's metadata copy shows the decision, so the
// record n3 reads looks like a new group's first election that chose it.
// n3 must keep the lead (it came from the home) and claim the home; every
// migration ends done. Handing the lead back left n2 leading under a
// record naming it, and each migration failed at await_target after its
// step timeout.
func TestMigrationLeadReachesTargetBeforeItsCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		rtt := [][]time.Duration{{0, 20 * ms, 200 * ms}, {20 * ms, 0, 20 * ms}, {200 * ms, 20 * ms, 0}}
		c := Start(t, 3, rtt, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "lag/#", Mode: fsm.Sequenced, Replicas: 3})
		creator := c.Node(1).Connect("creator", ConnectOptions{})
		names := make([]string, 4)
		for i := range names {
			names[i] = fmt.Sprintf("lag/%d", i)
			if code := creator.Publish(names[i], 1, false, "first"); code != packet.Success {
				t.Fatalf("first publish on %s: %v", names[i], code)
			}
		}
		meta := c.Node(0).Node.Meta()
		from, to := c.Node(1).ID, c.Node(2).ID
		c.Eventually("three metadata voters", func() bool {
			vs, err := meta.Voters(context.Background())
			return err == nil && len(vs) == 3
		})
		if leader, _ := meta.Leader(); leader != c.Node(0).ID {
			t.Fatalf("metadata leader %s, want %s", leader, c.Node(0).ID)
		}
		for _, n := range names {
			if g, _ := meta.State().Group(n); g.Home != from {
				t.Fatalf("%s homed on %s, want %s", n, g.Home, from)
			}
		}
		time.Sleep(500 * time.Millisecond) // lint:sleep-ok fake time: the groups settle (their first elections)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range names {
			g, _ := meta.State().Group(n)
			if _, err := meta.Propose(ctx, fsm.SetGroupDesired(fsm.DesiredChange{Group: g.ID, Epoch: g.Epoch, Home: to,
				Voters: []string{to, from, c.Node(0).ID}, Reason: fsm.ReasonManual, At: time.Now()})); err != nil {
				t.Fatalf("decision for %s: %v", n, err)
			}
		}
		c.Eventually("every group homed on the target", func() bool {
			for _, n := range names {
				if g, _ := meta.State().Group(n); g.Home != to || g.Desired != nil {
					return false
				}
			}
			return true
		})
		c.Eventually("the old home's migrations ended", func() bool {
			for _, m := range c.Node(1).Node.Migrations().Migrations() {
				if m.State == migration.StateRunning {
					return false
				}
			}
			return true
		})
		ms2 := c.Node(1).Node.Migrations().Migrations()
		if len(ms2) != len(names) {
			t.Errorf("%d migrations on the old home, want %d (one per group)", len(ms2), len(names))
		}
		for _, m := range ms2 {
			if m.State != migration.StateDone {
				t.Errorf("migration %s: %s (%s); steps %v", m.Group, m.State, m.Error, m.Steps)
			}
		}
	})
}
