package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestTopicsListsPlacement: `sextant topics` on a node that does not lead
// the metadata group lists a sequenced topic's placement group with its
// home, E(t) and Lth (the rule's latency_ms), read from the leader's
// placement manager through /v1/placement.
func TestTopicsListsPlacement(t *testing.T) {
	c1 := brokertest.Config(t)
	c1.NodeID, c1.ClusterAddr, c1.PlacementInterval = "p1", brokertest.FreeAddr(t), 200*time.Millisecond
	n1 := brokertest.Start(t, c1)
	c2 := brokertest.Config(t)
	c2.NodeID, c2.ClusterAddr, c2.Join, c2.PlacementInterval = "p2", brokertest.FreeAddr(t), []string{c1.ClusterAddr}, 200*time.Millisecond
	n2 := brokertest.Start(t, c2)
	brokertest.Eventually(t, 30*time.Second, func() bool { return len(n2.Cluster(t.Context()).Servers) == 2 }, "p2 in the metadata group")

	f := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(f, []byte("rules:\n  - match: fleet/#\n    mode: sequenced\n    latency_ms: 30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 20*time.Second, func() bool {
		code, _, _ := runCLI(t, "policy", "set", "--admin", n1.Addr("admin"), "-f", f)
		return code == 0
	}, "policy set")
	sub := n2.ConnectV5(&paho.Connect{ClientID: "watcher", CleanStart: true, KeepAlive: 30})
	sub.Sub("fleet/#", 1)
	pub := n1.ConnectV5(&paho.Connect{ClientID: "truck", CleanStart: true, KeepAlive: 30})
	var out string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last listing (sextant topics on p2):\n%s", out)
		}
	})
	brokertest.Eventually(t, 60*time.Second, func() bool {
		pub.Pub("fleet/7", 0, false, "here") // QoS 0: no wait for a commit on a loaded machine
		var code int
		code, out, _ = runCLI(t, "topics", "--admin", n2.Addr("admin"))
		line := lineWith(out, "fleet/7")
		// home p1, E(t) a figure (the group is monitored), Lth 30 ms
		return code == 0 && strings.Contains(line, " p1 ") && strings.Contains(line, "30.0ms") && strings.Count(line, "ms") == 2
	}, "the group listed with its home, E(t) and Lth")
	if !strings.Contains(out, "SEQUENCED GROUP") || !strings.Contains(out, "E(t)") {
		t.Fatalf("topics: %q", out)
	}
	t.Logf("sextant topics:\n%s", out)
}
