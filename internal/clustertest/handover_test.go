package clustertest

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/cluster/directory"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// handOverSetup starts three nodes, parks a persistent session with n QoS 1
// messages queued on node 1, and returns the client id, chosen so that its
// directory owner is node 3 (the cuts below are between nodes 1 and 2
// only). Node 1 and 2 are 400 ms apart, so a hand-over answer is on the
// wire for 200 ms: long enough to cut the link under it.
func handOverSetup(t *testing.T, n int, opts ...func(*Options)) (c *Cluster, id string, want []string) {
	return handOverSetupOwned(t, n, 2, opts...)
}

// handOverSetupOwned is handOverSetup with the client id's directory owner
// chosen: node index owner.
func handOverSetupOwned(t *testing.T, n, owner int, opts ...func(*Options)) (c *Cluster, id string, want []string) {
	c = Start(t, 3, nil, opts...)
	n1, n3 := c.Node(0), c.Node(2)
	ids := []string{c.Node(0).ID, c.Node(1).ID, n3.ID}
	for i := 0; ; i++ {
		id = fmt.Sprintf("mover-%d", i)
		if directory.Owner(id, ids) == ids[owner] {
			break
		}
	}
	cl := n1.Connect(id, ConnectOptions{SessionExpiry: 300})
	cl.Subscribe(1, "q/#")
	waitInterest(c, n1, "q/#")
	cl.Close()
	pub := n3.Connect("pub", ConnectOptions{})
	for i := range n {
		p := fmt.Sprintf("m%02d", i)
		pub.Publish("q/x", 1, false, p)
		want = append(want, p)
	}
	c.Eventually("messages queued on node 1", func() bool {
		return n1.Gather("sextant_queued_messages", nil) == float64(n)
	})
	c.SetRTT(0, 1, 400*time.Millisecond)
	return c, id, want
}

// expectResumed checks that a resuming CONNECT succeeded with its session
// present and that the queued messages then arrive, all and in order.
func expectResumed(t *testing.T, cl *Client, err error, want []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("resuming on node 2: %v", err)
	}
	if !cl.Connack.SessionPresent {
		t.Fatal("the resuming CONNECT got a fresh session")
	}
	expectPayloads(t, cl, want)
}

// expectPayloads checks the payloads of cl's next len(want) messages.
func expectPayloads(t *testing.T, cl *Client, want []string) {
	t.Helper()
	var got []string
	for _, m := range cl.Collect(len(want)) {
		got = append(got, m.Payload)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

type connectResult struct {
	cl  *Client
	err error
}

// resumeAsync resumes id's session on n in the background.
func resumeAsync(n *Node, id string) <-chan connectResult {
	done := make(chan connectResult, 1)
	go func() {
		cl, err := n.TryConnect(id, ConnectOptions{Resume: true, SessionExpiry: 300})
		done <- connectResult{cl, err}
	}()
	return done
}

// cutUnderTheAnswer waits until node 1 has exported the session (its answer
// is now in flight to node 2) and cuts nodes 1 and 2 apart until their link
// breaks, losing the answer.
func cutUnderTheAnswer(c *Cluster) {
	n1, n2 := c.Node(0), c.Node(1)
	c.Eventually("node 1 exported the session", func() bool {
		return n1.Gather("sextant_cluster_sessions_moving", nil) == 1
	})
	c.Partition(0, 1)
	c.Eventually("link from node 2 to node 1 down", func() bool {
		l := n2.Cluster.Peers().Link(n1.ID)
		return l == nil || !l.Up()
	})
}

// TestHandOverAnswerLostIsAskedAgain: the link between the old and the new
// node breaks while the session's state is on the wire. The old node kept
// the session; the new node asks again once the link is back, within the
// same CONNECT, and the client gets its session and every queued message.
func TestHandOverAnswerLostIsAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, id, want := handOverSetup(t, 20, func(o *Options) {
			o.Cluster = func(cfg *cluster.Config) { cfg.DirectoryTimeout = time.Minute }
			o.Config = func(cfg *config.Config) { cfg.ConnectTimeout = 2 * time.Minute }
		})
		n1, n2 := c.Node(0), c.Node(1)
		done := resumeAsync(n2, id)
		cutUnderTheAnswer(c)
		c.Heal(0, 1)
		r := <-done
		expectResumed(t, r.cl, r.err, want)
		c.Eventually("node 1 released the session", func() bool {
			return n1.Broker.Stats().Sessions == 0 && n1.Gather("sextant_cluster_sessions_moving", nil) == 0
		})
		if got := n1.Gather("sextant_cluster_sessions_handed_over_total", nil); got != 1 {
			t.Errorf("node 1 counted %v sessions handed over, want 1", got)
		}
	})
}

// TestAbandonedHandOverKeepsTheSession: the link stays cut past the
// CONNECT's directory timeout. The new node refuses the CONNECT with Server
// Unavailable instead of starting a fresh session, the old node keeps the
// session, and the client's next CONNECT, once the link is back, gets it
// with every queued message.
func TestAbandonedHandOverKeepsTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, id, want := handOverSetup(t, 20)
		n1, n2 := c.Node(0), c.Node(1)
		done := resumeAsync(n2, id)
		cutUnderTheAnswer(c)
		r := <-done
		if r.err == nil || r.cl == nil || r.cl.Connack.ReasonCode != packet.ServerUnavailable {
			t.Fatalf("CONNECT during a cut hand-over: %v, want CONNACK Server Unavailable", r.err)
		}
		if s := n1.Broker.Stats().Sessions; s != 1 {
			t.Fatalf("node 1 holds %d sessions, want the one it could not hand over", s)
		}
		c.Heal(0, 1)
		c.Eventually("link from node 2 to node 1 up", func() bool {
			l := n2.Cluster.Peers().Link(n1.ID)
			return l != nil && l.Up()
		})
		cl, err := n2.TryConnect(id, ConnectOptions{Resume: true, SessionExpiry: 300})
		expectResumed(t, cl, err, want)
		c.Eventually("node 1 released the session", func() bool { return n1.Broker.Stats().Sessions == 0 })
	})
}

// TestAbandonedHandOverWithTheOwnerCutOff: as above, but the directory
// owner is the old node itself, so the new node's request to restore the
// old claim is lost with the cut. Once the link is back, the old node asks
// the new one what became of the hand-over, learns it was abandoned, keeps
// the session and registers it again; the client's retry gets it.
func TestAbandonedHandOverWithTheOwnerCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, id, want := handOverSetupOwned(t, 20, 0)
		n1, n2 := c.Node(0), c.Node(1)
		done := resumeAsync(n2, id)
		cutUnderTheAnswer(c)
		if r := <-done; r.cl == nil || r.cl.Connack.ReasonCode != packet.ServerUnavailable {
			t.Fatalf("CONNECT during a cut hand-over: %v, want CONNACK Server Unavailable", r.err)
		}
		time.Sleep(time.Minute) // lint:sleep-ok fake time: node 1 tries to settle while still cut off
		if s := n1.Broker.Stats().Sessions; s != 1 {
			t.Fatalf("node 1 holds %d sessions while cut off, want its copy kept", s)
		}
		c.Heal(0, 1)
		c.Eventually("node 1 settled the hand-over", func() bool {
			return n1.Gather("sextant_cluster_sessions_moving", nil) == 0
		})
		cl, err := n2.TryConnect(id, ConnectOptions{Resume: true, SessionExpiry: 300})
		expectResumed(t, cl, err, want)
	})
}

// TestHandOverReleaseLostDropsTheOldCopy: the session arrives on node 2 but
// the release to node 1 is lost with the link. Node 1 asks node 2, learns
// the session is in use there, and drops its copy; the client keeps working
// on node 2.
func TestHandOverReleaseLostDropsTheOldCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, id, want := handOverSetup(t, 5)
		n1, n2, n3 := c.Node(0), c.Node(1), c.Node(2)
		cl, err := n2.TryConnect(id, ConnectOptions{Resume: true, SessionExpiry: 300})
		if err != nil || !cl.Connack.SessionPresent {
			t.Fatalf("CONNECT on node 2: %v", err)
		}
		c.Partition(0, 1) // the release is 200 ms from node 1
		c.Eventually("link from node 2 to node 1 down", func() bool {
			l := n2.Cluster.Peers().Link(n1.ID)
			return l == nil || !l.Up()
		})
		c.Heal(0, 1)
		c.Eventually("node 1 dropped its copy", func() bool {
			return n1.Broker.Stats().Sessions == 0 && n1.Gather("sextant_cluster_sessions_moving", nil) == 0
		})
		if got := n1.Gather("sextant_cluster_stale_sessions_total", nil); got != 1 {
			t.Errorf("node 1 counted %v stale sessions, want 1", got)
		}
		expectPayloads(t, cl, want)
		n3.Connect("pub2", ConnectOptions{}).Publish("q/z", 1, false, "later")
		if m := cl.Next(); m.Payload != "later" {
			t.Fatalf("after the settle got %v", m)
		}
	})
}

// TestCleanStartDoesNotWaitForTheDirectory: a clean start moves nothing, so
// its CONNACK does not wait for the directory owner 400 ms away; the
// client's connection on another node is still closed, its will published,
// moments later.
func TestCleanStartDoesNotWaitForTheDirectory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil)
		n1, n2, n3 := c.Node(0), c.Node(1), c.Node(2)
		ids := []string{n1.ID, n2.ID, n3.ID}
		var id string
		for i := 0; ; i++ {
			if id = fmt.Sprintf("fresh-%d", i); directory.Owner(id, ids) == n1.ID {
				break
			}
		}
		watch := n2.Connect("watch", ConnectOptions{})
		watch.Subscribe(1, "will/#")
		waitInterest(c, n2, "will/#")
		old := n3.Connect(id, ConnectOptions{Will: &Will{Topic: "will/" + id, Payload: "gone", QoS: 1}})
		c.SetRTT(0, 1, 400*time.Millisecond)
		c.SetRTT(1, 2, 400*time.Millisecond)

		start := time.Now()
		cl := n2.Connect(id, ConnectOptions{})
		if took := time.Since(start); took >= 200*time.Millisecond {
			t.Fatalf("a clean start's CONNACK took %v: it waited for the directory", took)
		}
		if cl.Connack.SessionPresent {
			t.Fatal("a clean start resumed a session")
		}
		old.WaitClosed()
		if d := old.Disconnected(); d == nil || d.ReasonCode != packet.SessionTakenOver {
			t.Fatalf("old connection ended with %+v, want DISCONNECT Session Taken Over", d)
		}
		if m := watch.Next(); m.Payload != "gone" {
			t.Fatalf("watcher got %v, want the old connection's will", m)
		}
		c.Eventually("node 3 ended the old session", func() bool { return n3.Broker.Stats().Sessions == 0 })
	})
}
