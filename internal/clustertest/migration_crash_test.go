package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestHandoverCrashAfterTheSwitch: a replicas 1 group is handed over from
// n2 to n3 while a QoS 1 publisher on n1 streams to it; once the switch
// has committed (the record names n3), and before the tail reaches n3 (the
// n2–n3 link is slow), one side crashes and comes back a second later.
// The target does not serve the group on the record alone (it would open
// an empty log); the old home never takes it back; the handover completes
// from the old home's fence record (a restarted old home hands the whole
// log over again). The checker finds nothing acknowledged lost, no
// duplicate, one order for every subscriber and the publisher's order
// kept, and the record names n3.
func TestHandoverCrashAfterTheSwitch(t *testing.T) {
	for _, victim := range []int{1, 2} {
		name := map[int]string{1: "the old home crashes", 2: "the target crashes"}[victim]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := Start(t, 3, nil, coreNodes, func(o *Options) { o.Store = true })
				c.SetRTT(1, 2, 200*time.Millisecond)
				c.SetPolicy(fsm.Rule{Match: "hc/#", Mode: fsm.Sequenced, Replicas: 1})
				k := NewSeqChecker("hc/t")
				first := c.Node(1).Connect("first", ConnectOptions{})
				k.Published(first.ID, "first", 1)
				if code := first.Publish("hc/t", 1, false, "first"); code != packet.Success {
					t.Fatalf("first publish: %v", code)
				}
				k.Acked("first")
				first.Close()
				meta := c.Node(0).Node.Meta()
				if rec, _ := meta.State().Group("hc/t"); rec.Home != c.Node(1).ID {
					t.Fatalf("group home %s, want %s", rec.Home, c.Node(1).ID)
				}
				stop := make(chan struct{})
				var cwg sync.WaitGroup
				var subs []string
				for i := range c.Nodes() {
					if i == victim {
						continue // its connections end with it
					}
					s := c.Node(i).Connect(fmt.Sprintf("sub%d", i), ConnectOptions{})
					s.Subscribe(1, "hc/#")
					collect(k, s, stop, &cwg)
					subs = append(subs, s.ID)
				}
				pub := c.Node(0).Connect("pub", ConnectOptions{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					if un := publishStream(k, pub, "hc/t", 1, payloads(pub.ID, 300), 8, 5*time.Millisecond); len(un) > 0 {
						t.Errorf("%d publishes not acknowledged", len(un))
					}
				}()
				time.Sleep(200 * time.Millisecond) // lint:sleep-ok fake time: the move's point in the stream
				to := c.Node(2).ID
				moved := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_, err := c.Node(0).Node.MoveGroup(ctx, "hc/t", to, time.Minute)
					moved <- err
				}()
				c.Eventually("the switch committed", func() bool {
					g, _ := meta.State().Group("hc/t")
					return g.Home == to
				})
				if n := c.Node(2).Node.Groups().Get("hc/t"); n != nil {
					t.Fatal("the target opened the group before the tail could reach it")
				}
				c.Crash(victim)
				time.Sleep(time.Second) // lint:sleep-ok fake time: down for a while
				c.Restart(victim)
				if err := <-moved; err != nil {
					t.Fatalf("move: %v", err)
				}
				wg.Wait()
				for _, s := range subs {
					c.Eventually(s+" has every acknowledged publish", func() bool { return k.Has(s) })
				}
				close(stop)
				cwg.Wait()
				for _, err := range k.Verify(subs, subs, []string{pub.ID}) {
					t.Error(err)
				}
				c.Eventually("the old home's recovery settled", func() bool {
					for _, m := range c.Node(1).Node.Migrations().Migrations() {
						if m.State == "running" {
							return false
						}
					}
					return true
				})
				g, _ := meta.State().Group("hc/t")
				if g.Home != to || len(g.Voters) != 1 || g.Epoch != 2 {
					t.Errorf("record after the crash: %+v, want %s home at epoch 2", g, to)
				}
				for _, m := range c.Node(1).Node.Migrations().Migrations() {
					t.Logf("on %s: %s %s -> %s %s (%s): pause %v %s; steps %v", c.Node(1).ID, m.Group, m.From, m.To, m.Kind, m.State, m.Pause, m.Error, m.Steps)
				}
				t.Logf("%d publishes acknowledged and delivered to %d subscribers", k.AckedCount(), len(subs))
			})
		})
	}
}
