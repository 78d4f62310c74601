package clustertest

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/cluster/directory"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestSessionMovesWithItsClient: a client with a persistent session
// subscribes on node 1 and goes away; QoS 1 messages published on node 3
// queue for it on node 1; it reconnects to node 2 with clean start 0 and
// receives them all, in order, and its subscription now lives on node 2.
func TestSessionMovesWithItsClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil)
		n1, n2, n3 := c.Node(0), c.Node(1), c.Node(2)
		cl := n1.Connect("mover", ConnectOptions{SessionExpiry: 300})
		cl.Subscribe(1, "q/#")
		waitInterest(c, n1, "q/#")
		cl.Close()

		pub := n3.Connect("pub", ConnectOptions{})
		const n = 50
		var want []string
		for i := range n {
			p := fmt.Sprintf("m%02d", i)
			pub.Publish("q/x", 1, false, p)
			want = append(want, p)
		}
		c.Eventually("messages queued on node 1", func() bool {
			return n1.Gather("sextant_queued_messages", nil) == n
		})

		moved, err := n2.TryConnect("mover", ConnectOptions{Resume: true, SessionExpiry: 300})
		if err != nil {
			t.Fatal(err)
		}
		if !moved.Connack.SessionPresent {
			t.Fatal("CONNACK on node 2 says no session present")
		}
		var got []string
		for _, m := range moved.Collect(n) {
			got = append(got, m.Payload)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after the move got %v, want %v", got, want)
		}
		// Node 1 kept its copy until node 2 confirmed the hand-over.
		c.Eventually("node 1 released the session", func() bool { return n1.Broker.Stats().Sessions == 0 })
		// The subscription moved: node 2 announces it, node 1 no longer.
		waitInterest(c, n2, "q/#")
		c.Eventually("node 1's interest withdrawn", func() bool { return !n3.HasInterest(n1.ID, "q/#") })
		pub.Publish("q/y", 1, false, "after")
		if m := moved.Next(); m.Payload != "after" {
			t.Fatalf("after the move, a new message arrived as %v", m)
		}
		if got := n2.Gather("sextant_cluster_takeovers_total", map[string]string{"result": "moved"}); got != 1 {
			t.Errorf("node 2 counted %v sessions moved in, want 1", got)
		}
	})
}

// TestTakeoverClosesTheOldConnection: a client still connected to node 1
// connects to node 2 with the same client id; node 1 sends DISCONNECT
// (Session Taken Over) and closes, and the session continues on node 2. A
// delayed will of the old connection is not published (the client came
// back before the delay, MQTT 5 3.1.3.2.2), and a clean start discards the
// old session.
func TestTakeoverClosesTheOldConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil)
		n1, n2, n3 := c.Node(0), c.Node(1), c.Node(2)
		watch := n3.Connect("watch", ConnectOptions{})
		watch.Subscribe(1, "will/#")
		waitInterest(c, n3, "will/#")

		old := n1.Connect("dup", ConnectOptions{SessionExpiry: 300, Will: &Will{Topic: "will/dup", Payload: "gone", QoS: 1, Delay: 30}})
		old.Subscribe(1, "d/#")
		waitInterest(c, n1, "d/#")

		cl := n2.Connect("dup", ConnectOptions{Resume: true, SessionExpiry: 300})
		old.WaitClosed()
		if d := old.Disconnected(); d == nil || d.ReasonCode != packet.SessionTakenOver {
			t.Fatalf("old connection ended with %+v, want DISCONNECT Session Taken Over", d)
		}
		if !cl.Connack.SessionPresent {
			t.Fatal("the session did not move")
		}
		waitInterest(c, n2, "d/#")
		pub := n3.Connect("pub", ConnectOptions{})
		pub.Publish("d/1", 1, false, "hello")
		if m := cl.Next(); m.Payload != "hello" {
			t.Fatalf("got %v", m)
		}

		// Clean start on node 3: the session on node 2 is discarded, its
		// connection closed.
		fresh := n3.Connect("dup", ConnectOptions{})
		cl.WaitClosed()
		if fresh.Connack.SessionPresent {
			t.Fatal("clean start resumed a session")
		}
		c.Eventually("subscription gone everywhere", func() bool {
			return !n1.HasInterest(n2.ID, "d/#") && !n3.HasInterest(n2.ID, "d/#")
		})
		time.Sleep(time.Minute) // lint:sleep-ok fake time: past the will delay
		if ms := watch.Pending(); len(ms) != 0 {
			t.Fatalf("watcher got %v; a taken-over session's will must not be published", ms)
		}
	})
}

// TestWillClusterWide: a client that vanishes from one node has its will
// delivered on every node, a retained will retained everywhere, a delayed
// will after its delay.
func TestWillClusterWide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil)
		var watchers []*Client
		for i, n := range c.Nodes() {
			w := n.Connect(fmt.Sprintf("watch-%d", i), ConnectOptions{})
			w.Subscribe(1, "will/#")
			waitInterest(c, n, "will/#")
			watchers = append(watchers, w)
		}
		dying := c.Node(0).Connect("dying", ConnectOptions{Will: &Will{Topic: "will/dying", Payload: "bye", QoS: 1, Retain: true}})
		late := c.Node(1).Connect("late", ConnectOptions{SessionExpiry: 60, Will: &Will{Topic: "will/late", Payload: "later", QoS: 1, Delay: 10}})
		dying.Drop()
		for _, w := range watchers {
			if m := w.Next(); m.Topic != "will/dying" || m.Payload != "bye" {
				t.Fatalf("%s got %v", w.ID, m)
			}
		}
		waitRetained(c, map[string]string{"will/dying": "bye"})

		start := time.Now()
		late.Drop()
		for _, w := range watchers {
			if m := w.Next(); m.Topic != "will/late" {
				t.Fatalf("%s got %v", w.ID, m)
			}
		}
		if waited := time.Since(start); waited < 10*time.Second {
			t.Fatalf("delayed will arrived after %v, before its 10 s delay", waited)
		}
	})
}

// TestStaleSessionDroppedAfterRestart: a node holding persistent sessions
// dies; their clients reconnect elsewhere (the old sessions are
// unreachable, so they start afresh). When the dead node comes back with the
// sessions in its store, it re-registers them, learns that newer claims
// exist, and drops its stale copies, both for a client whose directory
// entry lives on another node and for one whose entry the restarted node
// itself owns (and had lost).
func TestStaleSessionDroppedAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, func(o *Options) { o.Store = true })
		n1, n2 := c.Node(0), c.Node(1)
		all := []string{"n1", "n2", "n3"}
		ids := []string{pickClient(all, "n1"), pickClient(all, "n3")}
		for _, id := range ids {
			cl := n1.Connect(id, ConnectOptions{SessionExpiry: 3600})
			cl.Subscribe(1, "r/"+id)
			cl.Close()
		}
		c.Kill(0)
		c.Eventually("node 1 declared failed", func() bool { return len(n2.Cluster.Alive()) == 2 })

		var back []*Client
		for _, id := range ids {
			cl := n2.Connect(id, ConnectOptions{Resume: true, SessionExpiry: 3600})
			if cl.Connack.SessionPresent {
				t.Fatalf("%s: a session held by a dead node was resumed", id)
			}
			cl.Subscribe(1, "r/new/"+id)
			back = append(back, cl)
		}

		c.Restart(0)
		n1 = c.Node(0)
		c.Eventually("node 1 drops its stale copies", func() bool { return n1.Broker.Stats().Sessions == 0 })
		if got := n1.Gather("sextant_cluster_stale_sessions_total", nil); got != 2 {
			t.Errorf("node 1 counted %v stale sessions, want 2", got)
		}
		c.Eventually("node 1's old subscriptions withdrawn", func() bool { return len(n2.Interest()[n1.ID]) == 0 })
		// The clients' sessions on node 2 are untouched.
		pub := c.Node(2).Connect("pub", ConnectOptions{})
		for i, id := range ids {
			if back[i].Err() != nil {
				t.Fatalf("%s on node 2 disturbed: %v", id, back[i].Err())
			}
			pub.Publish("r/new/"+id, 1, false, "x")
			if m := back[i].Next(); m.Payload != "x" {
				t.Fatalf("%s got %v", id, m)
			}
		}
		if s := n2.Broker.Stats().Sessions; s != 2 {
			t.Fatalf("node 2 holds %d sessions, want the 2 clients'", s)
		}
	})
}

// pickClient returns a client id whose directory owner among nodes is want.
func pickClient(nodes []string, want string) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("roamer-%d", i)
		if directory.Owner(id, nodes) == want {
			return id
		}
	}
}
