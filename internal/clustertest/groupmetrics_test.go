package clustertest

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// histCount reads the number of observations of a histogram on n.
func histCount(t *testing.T, n *Node, name string) uint64 {
	t.Helper()
	mfs, err := n.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return count
}

// TestGroupMetricsMove: publishes to a sequenced topic with 3 replicas
// move every replica's applied-records counter and log-size gauges (the
// home's under role leader), the access node's commit-latency histogram
// and the home's Raft commit histogram; killing the home moves the leader
// changes on the survivors.
func TestGroupMetricsMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "m/#", Mode: fsm.Sequenced, Replicas: 3})
		pub := c.Node(1).Connect("pub", ConnectOptions{})
		const total = 20
		for i := range total {
			if code := pub.Publish("m/a", 1, false, fmt.Sprintf("%050d", i)); code != packet.Success {
				t.Fatalf("publish %d: %v", i, code)
			}
		}
		g, _ := c.Node(0).Node.Meta().State().Group("m/a")
		home := -1
		for i, n := range c.Nodes() {
			c.Eventually(n.ID+" applied every record", func() bool {
				return n.Gather("sextant_groups_applied_records_total", nil) == total &&
					n.Gather("sextant_groups_log_records", nil) == total
			})
			if b := n.Gather("sextant_groups_log_bytes", nil); b < total*50 {
				t.Fatalf("%s: log bytes %v for %d records of 50 bytes", n.ID, b, total)
			}
			if n.Gather("sextant_groups_log_segments", nil) < 1 {
				t.Fatalf("%s: no log segment", n.ID)
			}
			if n.ID == g.Home {
				home = i
			}
		}
		h := c.Node(home)
		if h.Gather("sextant_groups_log_records", map[string]string{"role": "leader"}) != total {
			t.Fatalf("home %s: log records as leader %v", h.ID, h.Gather("sextant_groups_log_records", map[string]string{"role": "leader"}))
		}
		if n := histCount(t, c.Node(1), "sextant_sequenced_commit_seconds"); n < total {
			t.Fatalf("access node: %d commit latencies observed for %d publishes", n, total)
		}
		if n := histCount(t, h, "sextant_replication_commit_seconds"); n == 0 {
			t.Fatal("home: no Raft commit latency observed")
		}
		changes := func() float64 {
			var sum float64
			for _, n := range c.Nodes() {
				if n.Running() {
					sum += n.Gather("sextant_replication_leader_changes_total", nil)
				}
			}
			return sum
		}
		if h.Gather("sextant_replication_leader_changes_total", nil) < 1 {
			t.Fatalf("home %s never counted becoming leader", h.ID)
		}
		c.Kill(home)
		before := changes()
		c.Eventually("a survivor becomes the leader", func() bool { return changes() > before })
	})
}
