package clustertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestRestartedBehindNeverServesAMovedGroup: a replicas 1 group is handed
// over from n2 to n3; n2 had taken a metadata snapshot before the move,
// which its log entries after it do not change at start (Raft applies
// them once a leader tells it the commit index). n2 restarts cut off from
// the others, so its copy still names it the group's home, and it keeps
// its old copy of the group's log. It opens nothing and takes no publish:
// its client's publish waits, and reaches the real home once n2 caught
// up. A move asked of n2 meanwhile answers that the metadata leader is
// unreachable (not that the group, created while n2 was down, is
// unknown), and the same move asked once n2 is reconnected is done.
func TestRestartedBehindNeverServesAMovedGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes, func(o *Options) { o.Store = true })
		c.SetPolicy(fsm.Rule{Match: "mc/#", Mode: fsm.Sequenced, Replicas: 1})
		old, real := c.Node(1), c.Node(2)
		first := old.Connect("first", ConnectOptions{})
		if code := first.Publish("mc/t", 1, false, "first"); code != packet.Success {
			t.Fatalf("first publish: %v", code)
		}
		first.Close()
		if g, _ := c.Node(0).Node.Meta().State().Group("mc/t"); g.Home != old.ID {
			t.Fatalf("group home %s, want %s", g.Home, old.ID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := old.Node.Meta().Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Node(0).Node.MoveGroup(ctx, "mc/t", real.ID, time.Minute); err != nil {
			t.Fatalf("move: %v", err)
		}
		// A group created after the snapshot: unknown to n2's copy at start.
		late := real.Connect("late", ConnectOptions{})
		if code := late.Publish("mc/u", 1, false, "late"); code != packet.Success {
			t.Fatalf("late publish: %v", code)
		}
		late.Close()
		sub := c.Node(0).Connect("sub", ConnectOptions{})
		sub.Subscribe(1, "mc/t")

		c.Kill(1)
		c.Partition(1, 0)
		c.Partition(1, 2)
		if err := old.start(); err != nil {
			t.Fatal(err)
		}
		st := old.Node.Meta().State()
		if g, _ := st.Group("mc/t"); g.Home != old.ID {
			t.Fatalf("the test did not start n2 behind: its copy names %s home", g.Home)
		}
		if _, ok := st.Group("mc/u"); ok {
			t.Fatal("the test did not start n2 behind: its copy knows the group created after its snapshot")
		}
		var opened atomic.Bool
		watchDone := make(chan struct{})
		stopWatch := make(chan struct{})
		stop := sync.OnceFunc(func() { close(stopWatch); <-watchDone })
		defer stop()
		go func() {
			defer close(watchDone)
			for {
				ch := old.Node.Groups().Changed()
				if old.Node.Groups().Get("mc/t") != nil {
					opened.Store(true)
				}
				select {
				case <-ch:
				case <-stopWatch:
					return
				}
			}
		}()

		pub := old.Connect("pub", ConnectOptions{})
		_, acked := pub.PublishAsync("mc/t", 1, "held", 0)
		time.Sleep(30 * time.Second) // lint:sleep-ok fake time: n2 cut off from the metadata leader meanwhile
		select {
		case a := <-acked:
			t.Fatalf("a publish was answered (%v, %v) by a node whose metadata copy is behind", a.Code, a.Err)
		default:
		}
		if opened.Load() {
			t.Fatal("n2 opened the group it handed over, on a copy behind the group")
		}
		if got := old.Gather("sextant_meta_caught_up", nil); got != 0 {
			t.Fatalf("sextant_meta_caught_up = %v on a node cut off since it started", got)
		}
		short, scancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := old.Node.MoveGroup(short, "mc/u", c.Node(0).ID, 10*time.Second)
		scancel()
		if !errors.Is(err, adminapi.ErrMoveUnavailable) {
			t.Fatalf("move asked of a node cut off from the metadata leader: %v, want ErrMoveUnavailable", err)
		}

		c.Heal(1, 0)
		c.Heal(1, 2)
		ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute) // the first one's minute is spent
		defer cancel()
		// The move below waits for its target to serve, which it asks over
		// n2's peer link to n1.
		c.Eventually("n2 hears from the metadata leader and its link to n1 is up", func() bool {
			id, _ := old.Node.Meta().Leader()
			l := old.Cluster.Peers().Link(c.Node(0).ID)
			return id != "" && l != nil && l.Up()
		})
		res, err := old.Node.MoveGroup(ctx, "mc/u", c.Node(0).ID, time.Minute)
		if err != nil {
			t.Fatalf("move asked of n2 once reconnected: %v", err)
		}
		if res.Home != c.Node(0).ID {
			t.Fatalf("moved to %s, want %s", res.Home, c.Node(0).ID)
		}
		a := <-acked
		if a.Err != nil || a.Code != packet.Success {
			t.Fatalf("the held publish: %v %v", a.Code, a.Err)
		}
		if m := sub.Next(); m.Payload != "held" {
			t.Fatalf("subscriber got %q, want the held publish", m.Payload)
		}
		if r := real.Node.Groups().Get("mc/t"); r == nil {
			t.Fatal("the real home does not serve the group")
		}
		if got := old.Gather("sextant_meta_caught_up", nil); got != 1 {
			t.Fatalf("sextant_meta_caught_up = %v after n2 caught up", got)
		}
		stop()
		if opened.Load() {
			t.Fatal("n2 opened the group it handed over")
		}
		c.WaitConverged()
	})
}
