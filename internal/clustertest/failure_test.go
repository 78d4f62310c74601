package clustertest

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestNodeKilledMidTraffic: while a publisher streams QoS 1 messages, a
// node with subscribers is killed. The others detect the failure, drop its
// interest and link, and keep delivering every message, in order, to the
// subscribers they hold, without holding the publisher back.
func TestNodeKilledMidTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil)
		n1, n2, n3 := c.Node(0), c.Node(1), c.Node(2)
		s1 := n1.Connect("s1", ConnectOptions{})
		s3 := n3.Connect("s3", ConnectOptions{})
		s2 := n2.Connect("s2", ConnectOptions{})
		for _, s := range []*Client{s1, s2, s3} {
			s.Subscribe(1, "k/#")
		}
		waitInterest(c, n2, "k/#")
		waitInterest(c, n3, "k/#")
		pub := n1.Connect("pub", ConnectOptions{})

		const total = 400
		var want []string
		killedAt := time.Time{}
		for i := range total {
			if i == total/4 {
				c.Kill(1)
				killedAt = time.Now()
			}
			p := fmt.Sprintf("%03d", i)
			start := time.Now()
			pub.Publish("k/x", 1, false, p)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("publish %d took %v: the dead node held the publisher back", i, d)
			}
			want = append(want, p)
			time.Sleep(50 * time.Millisecond) // lint:sleep-ok fake time: spreads the stream over the failure detection
		}
		c.Eventually("node 2 declared failed", func() bool {
			return !slices.Contains(n1.Cluster.Alive(), n2.ID) && !slices.Contains(n3.Cluster.Alive(), n2.ID)
		})
		t.Logf("stream lasted %v after the kill", time.Since(killedAt))
		for _, n := range []*Node{n1, n3} {
			if _, ok := n.Interest()[n2.ID]; ok {
				t.Errorf("%s still has node 2's interest", n.ID)
			}
			if n.Cluster.Peers().Link(n2.ID) != nil {
				t.Errorf("%s still has a link to node 2", n.ID)
			}
		}
		for _, s := range []*Client{s1, s3} {
			var got []string
			for _, m := range s.Collect(total) {
				got = append(got, m.Payload)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s got %d messages, not the %d published in order", s.ID, len(got), total)
			}
		}
		removed := n1.Gather("sextant_peer_dropped_messages_total", map[string]string{"peer": n2.ID, "reason": "link_removed"})
		down := n1.Gather("sextant_peer_dropped_messages_total", map[string]string{"peer": n2.ID, "reason": "link_down"})
		t.Logf("node 1 dropped %v messages queued for node 2 when it was removed, %v while its link was down", removed, down)
		if removed+down == 0 {
			t.Error("messages for the dead node were neither delivered nor counted as dropped")
		}

		// A new subscriber on node 3 is served from node 1 as before.
		s3b := n3.Connect("s3b", ConnectOptions{})
		s3b.Subscribe(0, "k/new")
		waitInterest(c, n3, "k/new")
		pub.Publish("k/new", 0, false, "still here")
		if m := s3b.Next(); m.Payload != "still here" {
			t.Fatalf("got %v", m)
		}
	})
}
