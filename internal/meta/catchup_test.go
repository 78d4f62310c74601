package meta

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/logging/logtest"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// A node restarted from a snapshot older than the group's last commands is
// not caught up while it cannot reach a leader, although its copy (the
// snapshot's) is readable at once; it catches up once it reaches one, with
// every command the leader had committed applied.
func TestRestartedNodeCatchesUpBeforeItIsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		c.tune = func(cfg *Config) { cfg.SnapshotThreshold = 1 << 20; cfg.TrailingLogs = 1 }
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		for _, m := range c.nodes {
			if err := m.WaitCaughtUp(ctxFor(t, 30*time.Second)); err != nil {
				t.Fatalf("%s: %v", m.ID(), err)
			}
		}
		var down string
		for id := range c.nodes {
			if id != lead.ID() {
				down = id
				break
			}
		}
		first, err := lead.Propose(ctxFor(t, 5*time.Second), registerCmd("before"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.nodes[down].Wait(ctxFor(t, 5*time.Second), first.Index); err != nil {
			t.Fatal(err)
		}
		if err := c.nodes[down].Snapshot(ctxFor(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		c.close(down)
		var last fsm.Result
		for i := range 5 {
			if last, err = lead.Propose(ctxFor(t, 5*time.Second), registerCmd(fmt.Sprintf("x%d", i))); err != nil {
				t.Fatal(err)
			}
		}

		c.nw.Isolate(host(down))
		back := c.open(down, true, voters("n1", "n2", "n3"))
		time.Sleep(20 * time.Second) // lint:sleep-ok fake time: the cut-off node tries to reach a leader meanwhile
		synctest.Wait()
		if back.IsCaughtUp() {
			t.Fatal("a node that reached no leader since it started says it caught up")
		}
		if _, ok := back.State().Node("before"); !ok {
			t.Fatal("the restarted node's copy lacks its snapshot's record")
		}
		if _, ok := back.State().Node("x4"); ok {
			t.Fatal("the test did not start the node behind: it has the last record already")
		}

		c.nw.Rejoin(host(down))
		if err := back.WaitCaughtUp(ctxFor(t, 60*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := back.State().Applied(); got < last.Index {
			t.Fatalf("caught up at applied index %d, the leader had committed %d", got, last.Index)
		}
		if _, ok := back.State().Node("x4"); !ok {
			t.Fatal("caught up without the last record")
		}
	})
}

// ReadBarrier on a follower sees a command committed through another node
// just before, and a single voter is caught up once it leads.
func TestReadBarrierIsLinearizable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		for i := range 10 {
			res, err := lead.Propose(ctxFor(t, 5*time.Second), registerCmd(fmt.Sprintf("r%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range c.nodes {
				if err := m.ReadBarrier(ctxFor(t, 5*time.Second)); err != nil {
					t.Fatalf("%s: %v", m.ID(), err)
				}
				if got := m.State().Applied(); got < res.Index {
					t.Fatalf("%s: after the read barrier applied %d < committed %d", m.ID(), got, res.Index)
				}
			}
		}

		solo := newCluster(t, 0)
		m := solo.open("n1", true, voters("n1"))
		if err := m.WaitCaughtUp(ctxFor(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		if !m.IsLeader() {
			t.Fatal("a single voter caught up before it led")
		}
	})
}

// A node restarted while the leader runs an earlier version (which answers
// read_index as an unknown op: a rolling upgrade) still catches up, from
// the commit index a leader's contact tells it, and says so.
func TestCatchUpWithALeaderOfAnEarlierVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		for _, m := range c.nodes {
			if err := m.WaitCaughtUp(ctxFor(t, 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			m.oldLeader.Store(true)
		}
		var down string
		for id := range c.nodes {
			if id != lead.ID() {
				down = id
				break
			}
		}
		c.close(down)
		var last fsm.Result
		var err error
		for i := range 5 {
			if last, err = lead.Propose(ctxFor(t, 5*time.Second), registerCmd(fmt.Sprintf("u%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		logger, logs := logtest.New(slog.LevelInfo)
		c.tune = func(cfg *Config) { cfg.Logger = logger }
		back := c.open(down, true, voters("n1", "n2", "n3"))
		if err := back.WaitCaughtUp(ctxFor(t, 60*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := back.State().Applied(); got < last.Index {
			t.Fatalf("caught up at applied index %d, the leader had committed %d", got, last.Index)
		}
		if !strings.Contains(logs.String(), "via=leader_contact") {
			t.Fatalf("the catch-up did not fall back to the leader's contact:\n%s", logs.String())
		}
	})
}
