package clustertest

import (
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/message"
)

// retainedOn returns the retained messages a node holds, topic -> payload.
func retainedOn(n *Node) map[string]string {
	out := map[string]string{}
	n.Broker.RetainedMessages(func(m *message.Message) bool {
		out[m.Topic] = string(m.Payload)
		return true
	})
	return out
}

// waitRetained waits until every running node holds exactly want.
func waitRetained(c *Cluster, want map[string]string) {
	c.T.Helper()
	c.Eventually("retained messages converge", func() bool {
		for _, n := range c.running() {
			if !maps.Equal(retainedOn(n), want) {
				return false
			}
		}
		return true
	})
}

func TestRetainedLastWriterWinsAndTombstones(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil)
		p := []*Client{
			c.Node(0).Connect("p1", ConnectOptions{}),
			c.Node(1).Connect("p2", ConnectOptions{}),
			c.Node(2).Connect("p3", ConnectOptions{}),
		}
		p[0].Publish("r/a", 1, true, "v1")
		waitRetained(c, map[string]string{"r/a": "v1"})
		// A subscriber on another node gets it at SUBSCRIBE.
		s := c.Node(2).Connect("s3", ConnectOptions{})
		s.Subscribe(1, "r/#")
		if m := s.Next(); m.Topic != "r/a" || m.Payload != "v1" || !m.Retain {
			t.Fatalf("subscriber on node 3 got %v", m)
		}
		p[1].Publish("r/a", 1, true, "v2")
		waitRetained(c, map[string]string{"r/a": "v2"})

		// Two writers at once: every node settles on the same one.
		p[0].Publish("r/b", 0, true, "from-1")
		p[2].Publish("r/b", 0, true, "from-3")
		c.Eventually("concurrent writes converge", func() bool {
			v := retainedOn(c.Node(0))["r/b"]
			return v != "" && retainedOn(c.Node(1))["r/b"] == v && retainedOn(c.Node(2))["r/b"] == v
		})

		// A deletion is not undone by an older write that arrives later:
		// node 3, cut off, writes r/c; then node 1 writes a newer r/c and
		// deletes it. When node 3 comes back, its older write loses to the
		// tombstone everywhere.
		c.Isolate(2)
		p[2].Publish("r/c", 1, true, "old")
		p[0].Publish("r/c", 1, true, "new")
		p[0].Publish("r/c", 1, true, "")
		c.Eventually("node 1 and 2 hold no r/c", func() bool {
			_, a := retainedOn(c.Node(0))["r/c"]
			_, b := retainedOn(c.Node(1))["r/c"]
			return !a && !b
		})
		c.Rejoin(2)
		c.WaitConverged()
		want := retainedOn(c.Node(0))
		delete(want, "r/c")
		waitRetained(c, want)
		if _, ok := want["r/b"]; !ok {
			t.Fatal("r/b lost")
		}
	})
}

// TestRetainedSyncAfterRestart: a node that was down gets what changed
// meanwhile (new messages, deletions) when it comes back, and keeps its
// own retained messages across the restart.
func TestRetainedSyncAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, func(o *Options) { o.Store = true })
		p1 := c.Node(0).Connect("p1", ConnectOptions{})
		p1.Publish("r/a", 1, true, "a")
		p1.Publish("r/b", 1, true, "b")
		waitRetained(c, map[string]string{"r/a": "a", "r/b": "b"})

		c.Kill(1)
		p1.Publish("r/a", 1, true, "")   // deleted while node 2 is down
		p1.Publish("r/c", 1, true, "c")  // added
		p1.Publish("r/b", 1, true, "b2") // replaced
		c.Eventually("node 2 declared failed", func() bool {
			return len(c.Node(0).Cluster.Alive()) == 2 && len(c.Node(2).Cluster.Alive()) == 2
		})
		c.Restart(1)
		waitRetained(c, map[string]string{"r/b": "b2", "r/c": "c"})

		// Node 2 writes, then restarts: its message survives (from its own
		// store) and stays everywhere.
		p2 := c.Node(1).Connect("p2", ConnectOptions{})
		p2.Publish("r/d", 1, true, "d")
		waitRetained(c, map[string]string{"r/b": "b2", "r/c": "c", "r/d": "d"})
		c.Kill(1)
		c.Restart(1)
		if got := retainedOn(c.Node(1))["r/d"]; got != "d" {
			t.Fatalf("after restart node 2 holds r/d = %q", got)
		}
		waitRetained(c, map[string]string{"r/b": "b2", "r/c": "c", "r/d": "d"})
	})
}

// TestRetainedDeletionSurvivesRestarts: every node that saw a deletion
// restarts while the one node that missed it still holds the old message.
// The deletion's tombstone, kept in the nodes' stores, stops the old copy
// from coming back when that node rejoins, and deletes it there.
func TestRetainedDeletionSurvivesRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, func(o *Options) { o.Store = true })
		p1 := c.Node(0).Connect("p1", ConnectOptions{})
		p1.Publish("r/t", 1, true, "old")
		p1.Publish("r/keep", 1, true, "k")
		waitRetained(c, map[string]string{"r/t": "old", "r/keep": "k"})

		c.Kill(2) // misses the deletion
		p1.Publish("r/t", 1, true, "")
		waitRetained(c, map[string]string{"r/keep": "k"})
		p1.Close()
		c.Kill(0)
		c.Kill(1)
		c.Restart(0)
		c.Restart(1)
		c.Restart(2)
		waitRetained(c, map[string]string{"r/keep": "k"})
		// A new subscriber anywhere gets no r/t.
		for _, n := range c.Nodes() {
			s := n.Connect("s-"+n.ID, ConnectOptions{})
			s.Subscribe(1, "r/#")
			if m := s.Next(); m.Topic != "r/keep" {
				t.Fatalf("%s: a subscriber got %v", n.ID, m)
			}
			if ms := s.Pending(); len(ms) != 0 {
				t.Fatalf("%s: a subscriber also got %v", n.ID, ms)
			}
		}
	})
}

// TestRetainedTombstoneLeavesTheStoreAfterItsTTL: a deletion's tombstone is
// stored while it matters and removed from the store once its TTL passed.
func TestRetainedTombstoneLeavesTheStoreAfterItsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 2, nil, func(o *Options) {
			o.Store = true
			o.Cluster = func(cfg *cluster.Config) { cfg.TombstoneTTL = time.Minute }
		})
		stored := func(n *Node) map[string]string {
			out := map[string]string{}
			if err := n.Store.LoadRetained(func(m *message.Message) error {
				out[m.Topic] = string(m.Payload)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return out
		}
		p := c.Node(0).Connect("p", ConnectOptions{})
		p.Publish("r/t", 1, true, "v")
		waitRetained(c, map[string]string{"r/t": "v"})
		p.Publish("r/t", 1, true, "")
		waitRetained(c, map[string]string{})
		for _, n := range c.Nodes() {
			c.Eventually(n.ID+" stores the tombstone", func() bool { return maps.Equal(stored(n), map[string]string{"r/t": ""}) })
		}
		for _, n := range c.Nodes() {
			c.Eventually(n.ID+" forgets the tombstone", func() bool { return len(stored(n)) == 0 })
		}
	})
}
