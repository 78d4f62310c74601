package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/migration"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestMigrationUnderTraffic: a sequenced topic's group is moved (an
// operator's move, twice: to a second node, then a third) while QoS 1
// publishers on two nodes stream to it, each with a window in flight, and
// subscribers on every node receive. For replicas 1 the log is handed over;
// for replicas 3 a new replica joins as a learner, takes the lead and the
// old home leaves (twice), then the lead alone moves back to the first
// home, still a voter. The checker finds nothing acknowledged lost, no
// duplicate, one order for every subscriber, each publisher's messages in
// its order; no client's connection ended.
func TestMigrationUnderTraffic(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := 3
				if replicas == 3 {
					n = 5 // the group moves to nodes that hold no replica
				}
				c := Start(t, n, nil, coreNodes)
				c.SetPolicy(fsm.Rule{Match: "mig/#", Mode: fsm.Sequenced, Replicas: replicas})
				k := NewSeqChecker("mig/t")
				first := c.Node(0).Connect("first", ConnectOptions{})
				k.Published(first.ID, "first", 1)
				if code := first.Publish("mig/t", 1, false, "first"); code != packet.Success {
					t.Fatalf("first publish: %v", code)
				}
				k.Acked("first")
				meta := c.Node(0).Node.Meta()
				rec, _ := meta.State().Group("mig/t")
				if rec.Home != c.Node(0).ID {
					t.Fatalf("group home %s, want %s", rec.Home, c.Node(0).ID)
				}
				// Targets: nodes that are not replicas (replicas 3: the
				// group has 3 of the 5).
				var targets []int
				for i := 1; i < n && len(targets) < 2; i++ {
					if !contains(rec.Voters, c.Node(i).ID) {
						targets = append(targets, i)
					}
				}
				if replicas == 3 {
					// Then back to the first home, which is still a
					// voter: a move of the lead alone.
					targets = append(targets, 0)
				}
				stop := make(chan struct{})
				var cwg sync.WaitGroup
				var subs []string
				var clients []*Client
				for i := range c.Nodes() {
					s := c.Node(i).Connect(fmt.Sprintf("sub%d", i), ConnectOptions{})
					s.Subscribe(1, "mig/#")
					collect(k, s, stop, &cwg)
					subs = append(subs, s.ID)
					clients = append(clients, s)
				}
				var wg sync.WaitGroup
				var pubs []string
				for _, i := range []int{0, n - 1} {
					cl := c.Node(i).Connect(fmt.Sprintf("pub%d", i), ConnectOptions{})
					pubs = append(pubs, cl.ID)
					clients = append(clients, cl)
					wg.Add(1)
					go func() {
						defer wg.Done()
						if un := publishStream(k, cl, "mig/t", 1, payloads(cl.ID, 400), 16, time.Millisecond); len(un) > 0 {
							t.Errorf("%s: %d publishes not acknowledged", cl.ID, len(un))
						}
					}()
				}
				time.Sleep(100 * time.Millisecond) // lint:sleep-ok fake time: the move's point in the streams
				for _, to := range targets {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					res, err := c.Node(1).Node.MoveGroup(ctx, "mig/t", c.Node(to).ID, time.Minute)
					cancel()
					if err != nil {
						t.Fatalf("move to %s: %v", c.Node(to).ID, err)
					}
					t.Logf("moved %s from %s to %s (voters %v, epoch %d) in %.1f ms", res.Group, res.From, res.Home, res.Voters, res.Epoch, res.Seconds*1000)
					time.Sleep(50 * time.Millisecond) // lint:sleep-ok fake time: traffic between the moves
				}
				wg.Wait()
				for _, s := range subs {
					c.Eventually(s+" has every acknowledged publish", func() bool { return k.Has(s) })
				}
				close(stop)
				cwg.Wait()
				for _, err := range k.Verify(subs, subs, pubs) {
					t.Error(err)
				}
				for _, cl := range clients {
					select {
					case <-cl.Done:
						t.Errorf("client %s lost its connection", cl.ID)
					default:
					}
				}
				g, _ := meta.State().Group("mig/t")
				if last := c.Node(targets[len(targets)-1]).ID; g.Home != last || g.Desired != nil || len(g.Voters) != replicas {
					t.Errorf("record after the moves: %+v, want home %s, %d voters, no decision", g, last, replicas)
				}
				for _, nd := range c.Nodes() {
					for _, m := range nd.Node.Migrations().Migrations() {
						t.Logf("on %s: %s %s -> %s %s (%s): total %v, pause %v %s; steps %v", nd.ID, m.Group, m.From, m.To, m.Kind, m.State, m.Total, m.Pause, m.Error, m.Steps)
						if m.State != migration.StateDone {
							t.Errorf("migration on %s: %+v", nd.ID, m)
						}
					}
				}
				t.Logf("%d publishes acknowledged and delivered to %d subscribers", k.AckedCount(), len(subs))
			})
		})
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
