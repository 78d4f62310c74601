package clustertest

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/replicas"
)

// TestGroupReplicasOpenAndLeaderClaimsHome: a group recorded in the
// metadata with three voters opens a replica on each of them; the replica
// that wins the election records itself as the home (the record named
// another node), and after the home is killed another replica takes over
// and records itself in turn.
func TestGroupReplicasOpenAndLeaderClaimsHome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		m := c.Node(0).Node.Meta()
		c.Eventually("nodes registered", func() bool { return len(m.State().Nodes()) == 3 })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rec, created, err := m.CreateGroup(ctx, fsm.Group{ID: "g/1", Rule: "g/#", Home: "n3", Voters: []string{"n3", "n1", "n2"}, Created: time.Now()})
		if err != nil || !created {
			t.Fatalf("create: %v %v", created, err)
		}
		for _, n := range c.Nodes() {
			c.Eventually(n.ID+" opened g/1", func() bool { return n.Node.Groups().Get("g/1") != nil })
		}
		leader := func() string {
			for _, n := range c.Nodes() {
				if !n.Running() {
					continue
				}
				if r := n.Node.Groups().Get("g/1"); r != nil && r.Rep.IsLeader() {
					return n.ID
				}
			}
			return ""
		}
		c.Eventually("a leader that is the home", func() bool {
			g, _ := m.State().Group("g/1")
			l := leader()
			return l != "" && g.Home == l
		})
		g, _ := m.State().Group("g/1")
		t.Logf("home %s epoch %d (was %s epoch %d)", g.Home, g.Epoch, rec.Home, rec.Epoch)
		var idx int
		for i, n := range c.Nodes() {
			if n.ID == g.Home {
				idx = i
			}
		}
		c.Kill(idx)
		m = c.Node((idx + 1) % 3).Node.Meta()
		c.Eventually("a new home after the kill", func() bool {
			ng, _ := m.State().Group("g/1")
			l := leader()
			return l != "" && ng.Home == l && ng.Home != g.Home && ng.Epoch > g.Epoch && ng.HomeReason == fsm.ReasonFailover
		})
	})
}

// coreNodes makes every node a core node, a voter of the metadata group,
// so that the metadata group survives the loss of any one node.
func coreNodes(o *Options) {
	prev := o.Config
	o.Config = func(c *config.Config) {
		c.Tier = membership.TierCore
		if prev != nil {
			prev(c)
		}
	}
}

// TestSequencedPublishCommitsOnReplicas: QoS 1 publishes to a sequenced
// topic are acknowledged once committed, and every replica holds them in
// publish order with gap-free indexes.
func TestSequencedPublishCommitsOnReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "seq/#", Mode: fsm.Sequenced, Replicas: 3})
		pub := c.Node(1).Connect("pub", ConnectOptions{})
		for i := range 20 {
			if code := pub.Publish("seq/a", 1, false, fmt.Sprint(i)); code != packet.Success {
				t.Fatalf("publish %d: %v", i, code)
			}
		}
		for _, n := range c.Nodes() {
			var r *replicas.Replica
			c.Eventually(n.ID+" has the group", func() bool { r = n.Node.Groups().Get("seq/a"); return r != nil })
			c.Eventually(n.ID+" applied 20 records", func() bool { return r.Seq.NextSeq() == 21 })
			recs, err := r.Seq.Range("seq/a", 1, 100, 1<<20)
			if err != nil || len(recs) != 20 {
				t.Fatalf("%s: %d records, %v", n.ID, len(recs), err)
			}
			for i, rec := range recs {
				m, err := message.Decode(rec.Message)
				if err != nil || string(m.Payload) != fmt.Sprint(i) || rec.Index != uint64(i+1) {
					t.Fatalf("%s: record %d: index %d payload %q %v", n.ID, i, rec.Index, m.Payload, err)
				}
			}
		}
	})
}
