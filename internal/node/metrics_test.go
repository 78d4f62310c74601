package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/store"
)

// histogramCount returns the sample count of the histogram called name in
// g, and whether it was there.
func histogramCount(t *testing.T, g prometheus.Gatherer, name string) (uint64, bool) {
	t.Helper()
	fs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.GetName() == name && f.GetType() == dto.MetricType_HISTOGRAM && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram().GetSampleCount(), true
		}
	}
	return 0, false
}

// TestStoreSyncsCountedWithFsyncAlways: with fsync=always every commit is
// made durable by bbolt's own fdatasyncs, and sextant_store_sync_seconds
// counts each.
func TestStoreSyncsCountedWithFsyncAlways(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.Fsync = "always"
	n := brokertest.Start(t, cfg)
	before, _ := histogramCount(t, n.Metrics().Registry, "sextant_store_commit_seconds")
	const commits = 5
	for i := range commits {
		var b store.Batch
		b.PutRetained(&message.Message{Topic: "t", Payload: []byte{byte(i)}, Retain: true})
		done := make(chan error, 1)
		if err := n.Store().Commit(context.Background(), &b, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	committed, _ := histogramCount(t, n.Metrics().Registry, "sextant_store_commit_seconds")
	synced, ok := histogramCount(t, n.Metrics().Registry, "sextant_store_sync_seconds")
	if !ok || committed-before < commits || synced != committed {
		t.Fatalf("%d commits (%d before the test's), %d syncs counted; want a sync per commit", committed, before, synced)
	}
}

// gauge returns the value of the gauge called name whose labels include
// those given, and whether there is one.
func gauge(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	fs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestClusterMetrics: a node exports its build, the members by state and
// the metadata group's leadership and last contact with the leader.
func TestClusterMetrics(t *testing.T) {
	n1 := brokertest.Start(t, clusterConfig(t, "m1"))
	n2 := brokertest.Start(t, clusterConfig(t, "m2", n1.Cfg.ClusterAddr))
	brokertest.Eventually(t, 30*time.Second, func() bool {
		alive, _ := gauge(t, n2.Metrics().Registry, "sextant_cluster_members", "state", "alive")
		known, _ := gauge(t, n2.Metrics().Registry, "sextant_meta_leader_known")
		return alive == 2 && known == 1
	}, "m2 sees two members and a leader")
	for _, n := range []*brokertest.Node{n1, n2} {
		reg := n.Metrics().Registry
		if v, ok := gauge(t, reg, "sextant_build_info"); !ok || v != 1 {
			t.Errorf("%s: sextant_build_info %v %v", n.Cfg.NodeID, v, ok)
		}
		brokertest.Eventually(t, 30*time.Second, func() bool { v, _ := gauge(t, reg, "sextant_node_ready"); return v == 1 }, "sextant_node_ready 1")
		leader, _ := gauge(t, reg, "sextant_meta_leader")
		last, ok := gauge(t, reg, "sextant_meta_last_contact_seconds")
		switch {
		case !ok:
			t.Errorf("%s: no sextant_meta_last_contact_seconds", n.Cfg.NodeID)
		case leader == 1 && last != 0:
			t.Errorf("%s leads but its last contact is %v s ago", n.Cfg.NodeID, last)
		case leader == 0 && (last < 0 || last > 10):
			t.Errorf("%s follows and last heard from the leader %v s ago", n.Cfg.NodeID, last)
		}
		if v, ok := gauge(t, reg, "sextant_cluster_members", "state", "failed"); !ok || v != 0 {
			t.Errorf("%s: failed members %v %v; want a series at 0", n.Cfg.NodeID, v, ok)
		}
	}
}
