package node_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// TestMigrationsListedClusterWide: GET /v1/migrations on a node that ran
// no migration lists the one another node ran, says that every node
// answered, and ?node= narrows it to one node; once the node that ran it
// stops, the list says so (it did not answer) instead of hiding it.
func TestMigrationsListedClusterWide(t *testing.T) {
	n1 := brokertest.Start(t, clusterConfig(t, "n1"))
	n2 := brokertest.Start(t, clusterConfig(t, "n2", n1.Cfg.ClusterAddr))
	n3 := brokertest.Start(t, clusterConfig(t, "n3", n1.Cfg.ClusterAddr))
	byID := map[string]*brokertest.Node{"n1": n1, "n2": n2, "n3": n3}
	brokertest.Eventually(t, 30*time.Second, func() bool {
		for _, n := range byID {
			if len(n.Cluster(context.Background()).Registered) != 3 {
				return false
			}
			alive := 0
			for _, m := range n.Nodes() {
				if m.State == "alive" {
					alive++
				}
			}
			if alive != 3 {
				return false
			}
		}
		return true
	}, "three nodes registered and alive everywhere")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := n1.PutPolicies(ctx, []fsm.Rule{{Match: "ml/#", Mode: fsm.Sequenced, Replicas: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool { return len(n2.Policies().Rules) == 1 }, "n2 has the policy")
	pub := brokertest.ConnectV3To(t, "tcp://"+n2.MQTT(), "ml-pub", true, nil)
	brokertest.Wait(t, pub.Publish("ml/t", 1, false, "x"), "first publish")

	var home string
	brokertest.Eventually(t, 10*time.Second, func() bool {
		g, ok := n1.Meta().State().Group("ml/t")
		home = g.Home
		for _, n := range byID { // MoveGroup reads the asker's copy
			if _, in := n.Meta().State().Group("ml/t"); !in {
				return false
			}
		}
		return ok
	}, "the group recorded on every node")
	ids := []string{"n1", "n2", "n3"}
	others := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == home })
	to, asker := others[0], others[1]
	res, err := byID[asker].MoveGroup(ctx, "ml/t", to, 30*time.Second)
	if err != nil || res.Home != to {
		t.Fatalf("move to %s: %+v, %v", to, res, err)
	}

	get := func(node, query string) adminapi.MigrationList {
		t.Helper()
		var l adminapi.MigrationList
		if err := getJSON("http://"+byID[node].Addr("admin")+"/v1/migrations"+query, &l); err != nil {
			t.Fatalf("GET /v1/migrations%s on %s: %v", query, node, err)
		}
		return l
	}
	ran := func(l adminapi.MigrationList) bool {
		return slices.ContainsFunc(l.Migrations, func(m adminapi.MigrationInfo) bool {
			return m.Node == home && m.From == home && m.To == to && m.State == "done"
		})
	}
	// The record names the new home before the old one hears the target
	// serves it: the migration may still be running for a moment.
	var l adminapi.MigrationList
	brokertest.Eventually(t, 10*time.Second, func() bool { l = get(asker, ""); return ran(l) }, "the migration done")
	if !slices.Equal(l.Nodes, ids) || len(l.Unanswered) != 0 {
		t.Fatalf("GET /v1/migrations on %s (%s ran the move to %s): %+v", asker, home, to, l)
	}
	if l := get(asker, "?node="+home); !ran(l) || !slices.Equal(l.Nodes, []string{home}) {
		t.Fatalf("?node=%s: %+v", home, l)
	}
	if l := get(asker, "?node="+to); ran(l) || !slices.Equal(l.Nodes, []string{to}) {
		t.Fatalf("?node=%s: %+v", to, l)
	}
	if err := getJSON("http://"+byID[asker].Addr("admin")+"/v1/migrations?node=n9", &l); err == nil {
		t.Fatal("?node=n9 (not registered) answered 200")
	}

	// The node that ran it stops: its migrations are missing, and the
	// list says that node did not answer.
	byID[home].Stop()
	l = get(asker, "")
	if ran(l) || slices.Contains(l.Nodes, home) || len(l.Unanswered) != 1 || l.Unanswered[0].Node != home || l.Unanswered[0].Error == "" {
		t.Fatalf("GET /v1/migrations on %s with %s stopped: %+v", asker, home, l)
	}
	t.Logf("with %s stopped: nodes %v, unanswered %+v", home, l.Nodes, l.Unanswered)
}
