package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// voterIDs returns the metadata group's voters as n sees them.
func voterIDs(n *brokertest.Node) []string {
	var ids []string
	for _, s := range n.Cluster(context.Background()).Servers {
		if s.Voter {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func registered(n *brokertest.Node, id string) bool {
	return slices.ContainsFunc(n.Cluster(context.Background()).Registered, func(r fsm.Node) bool { return r.ID == id })
}

// TestRemovingNodes: a node drained with leave takes itself out of the
// metadata group and the registry; a node that is gone without draining is
// removed by another with RemoveNode; a node still alive, or the node
// itself, is refused.
func TestRemovingNodes(t *testing.T) {
	n1 := brokertest.Start(t, clusterConfig(t, "r1"))
	n2 := brokertest.Start(t, clusterConfig(t, "r2", n1.Cfg.ClusterAddr))
	n3 := brokertest.Start(t, clusterConfig(t, "r3", n1.Cfg.ClusterAddr))
	brokertest.Eventually(t, 30*time.Second, func() bool {
		return slices.Equal(voterIDs(n1), []string{"r1", "r2", "r3"}) && registered(n1, "r3")
	}, "three voters, r3 registered")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rep, err := n3.Drain(ctx, adminapi.DrainRequest{Leave: true})
	if err != nil || !rep.LeftGroup || rep.Reason != packet.ServerMoved.String() {
		t.Fatalf("drain with leave: %+v %v", rep, err)
	}
	n3.Stop()
	brokertest.Eventually(t, 10*time.Second, func() bool {
		return slices.Equal(voterIDs(n1), []string{"r1", "r2"}) && !registered(n1, "r3")
	}, "r3 out of the group and the registry")

	n4 := brokertest.Start(t, clusterConfig(t, "r4", n1.Cfg.ClusterAddr))
	brokertest.Eventually(t, 30*time.Second, func() bool { return slices.Equal(voterIDs(n1), []string{"r1", "r2", "r4"}) }, "r4 joins as a voter")
	if err := n1.RemoveNode(ctx, "r4", false); !errors.Is(err, adminapi.ErrNodeAlive) {
		t.Fatalf("removing a live node: %v", err)
	}
	if err := n1.RemoveNode(ctx, "r1", true); !errors.Is(err, adminapi.ErrCannotLeave) {
		t.Fatalf("removing itself: %v", err)
	}
	n4.Stop() // its disk is lost, say: it will not drain
	brokertest.Eventually(t, 30*time.Second, func() bool { return n1.RemoveNode(ctx, "r4", false) == nil }, "r4 removed once it is gone")
	if got := voterIDs(n2); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("voters after removing r4: %v", got)
	}
	if _, err := n2.PutPolicies(ctx, []fsm.Rule{{Match: "ops/#", Mode: fsm.Direct}}, nil); err != nil {
		t.Fatalf("the group of two does not commit: %v", err)
	}
}

// TestMetadataRebuiltAfterLosingQuorum follows docs/operations.md when two
// of three core nodes are lost for good: the survivor still reads its
// policies (a local copy), cannot change them, and after its metadata
// directory is moved aside and it restarts without a join list it leads a
// new group of one; the policies are put back and a new node joins. Its
// sessions, kept in sextant.db and not in the metadata, survive.
func TestMetadataRebuiltAfterLosingQuorum(t *testing.T) {
	cfg1 := clusterConfig(t, "q1")
	n1 := brokertest.Start(t, cfg1)
	n2 := brokertest.Start(t, clusterConfig(t, "q2", n1.Cfg.ClusterAddr))
	n3 := brokertest.Start(t, clusterConfig(t, "q3", n1.Cfg.ClusterAddr))
	brokertest.Eventually(t, 30*time.Second, func() bool { return len(voterIDs(n1)) == 3 }, "three voters")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rules := []fsm.Rule{{Match: "swarm/+/#", Mode: fsm.Direct}}
	if _, err := n1.PutPolicies(ctx, rules, nil); err != nil {
		t.Fatal(err)
	}
	s, ack := n1.RawConnect(&packet.Connect{ProtocolName: "MQTT", Version: packet.V5, ClientID: "keeper", CleanStart: true, KeepAlive: 60, Props: expiry(3600)})
	if ack.ReasonCode != packet.Success {
		t.Fatal(packet.Describe(ack))
	}
	s.Subscribe(1, packet.Subscription{Filter: "keep/#", QoS: 1})
	s.Close()

	n2.Stop()
	n3.Stop()
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	_, err := n1.PutPolicies(short, []fsm.Rule{{Match: "x/#", Mode: fsm.Direct}}, nil)
	cancelShort()
	if err == nil {
		t.Fatal("a group without quorum committed a change")
	}
	saved := n1.Policies()
	if len(saved.Rules) != 1 || saved.Rules[0].Match != "swarm/+/#" {
		t.Fatalf("the survivor's local copy of the policies: %+v", saved)
	}

	n1.Stop()
	if err := os.Rename(filepath.Join(cfg1.DataDir, "meta"), filepath.Join(cfg1.DataDir, "meta.lost")); err != nil {
		t.Fatal(err)
	}
	n1 = brokertest.Start(t, cfg1)
	brokertest.Eventually(t, 30*time.Second, func() bool { return n1.Cluster(ctx).IsLeader }, "the survivor leads a new group")
	if _, err := n1.PutPolicies(ctx, saved.Rules, nil); err != nil {
		t.Fatalf("putting the policies back: %v", err)
	}
	n5 := brokertest.Start(t, clusterConfig(t, "q5", n1.Cfg.ClusterAddr))
	brokertest.Eventually(t, 30*time.Second, func() bool {
		p := n5.Policies()
		return slices.Equal(voterIDs(n1), []string{"q1", "q5"}) && len(p.Rules) == 1 && p.Rules[0].Match == "swarm/+/#"
	}, "a new node joins the rebuilt group and reads the policies")
	_, ack = n1.RawConnect(&packet.Connect{ProtocolName: "MQTT", Version: packet.V5, ClientID: "keeper", KeepAlive: 60, Props: expiry(3600)})
	if !ack.SessionPresent {
		t.Fatal("the survivor's sessions did not survive rebuilding the metadata group")
	}
}

func expiry(secs uint32) packet.Properties {
	var p packet.Properties
	p.SetSessionExpiry(secs)
	return p
}
