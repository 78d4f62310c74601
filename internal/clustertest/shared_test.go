package clustertest

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestSharedGroupsExactlyOnceClusterWide: a shared group with members on
// two nodes gets each message exactly once in the whole cluster, served by
// the publisher's node when it has a member, else by one remote node
// (alternating); a second group gets its own copy.
func TestSharedGroupsExactlyOnceClusterWide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil)
		n1, n2, n3 := c.Node(0), c.Node(1), c.Node(2)
		g := []*Client{
			n1.Connect("g-1a", ConnectOptions{}),
			n2.Connect("g-2a", ConnectOptions{}),
			n2.Connect("g-2b", ConnectOptions{}),
		}
		for _, cl := range g {
			cl.Subscribe(1, "$share/g/s/#")
		}
		h := n3.Connect("h-3", ConnectOptions{})
		h.Subscribe(1, "$share/h/s/#")
		waitInterest(c, n1, "$share/g/s/#")
		waitInterest(c, n2, "$share/g/s/#")
		waitInterest(c, n3, "$share/h/s/#")

		const n = 60
		// From node 3, which has no member of g: each message to exactly one
		// member, on node 1 or node 2.
		pub3 := n3.Connect("pub-3", ConnectOptions{})
		for i := range n {
			pub3.Publish("s/x", 1, false, fmt.Sprintf("a%02d", i))
		}
		got := collectGroup(t, g, n)
		if got["g-1a"] == 0 || got["g-2a"]+got["g-2b"] == 0 {
			t.Errorf("remote publisher: deliveries per member %v; both nodes should serve the group", got)
		}
		if hs := h.Collect(n); len(hs) != n {
			t.Fatalf("group h got %d", len(hs))
		}

		// From node 2, which has members: node 2 serves every message.
		pub2 := n2.Connect("pub-2", ConnectOptions{})
		for i := range n {
			pub2.Publish("s/y", 1, false, fmt.Sprintf("b%02d", i))
		}
		got = collectGroup(t, g, n)
		if got["g-1a"] != 0 || got["g-2a"]+got["g-2b"] != n {
			t.Errorf("publisher on node 2: deliveries per member %v; node 2's members should get all", got)
		}
		if hs := h.Collect(n); len(hs) != n {
			t.Fatalf("group h got %d", len(hs))
		}
		time.Sleep(time.Second) // lint:sleep-ok fake time: lets any duplicate arrive
		for _, cl := range append(g, h) {
			if extra := cl.Pending(); len(extra) != 0 {
				t.Errorf("%s got %d duplicates: %v", cl.ID, len(extra), extra)
			}
		}
	})
}

// collectGroup gathers n messages from a group's members and checks that
// each payload came exactly once; it returns the count per member.
func collectGroup(t *testing.T, members []*Client, n int) map[string]int {
	t.Helper()
	seen := map[string]string{}
	per := map[string]int{}
	deadline := time.Now().Add(Timeout)
	for len(seen) < n {
		progress := false
		for _, cl := range members {
			for _, m := range cl.Pending() {
				progress = true
				if prev, dup := seen[m.Payload]; dup {
					t.Fatalf("%s delivered twice: to %s and %s", m.Payload, prev, cl.ID)
				}
				seen[m.Payload] = cl.ID
				per[cl.ID]++
			}
		}
		if !progress {
			if time.Now().After(deadline) {
				t.Fatalf("group got %d of %d messages", len(seen), n)
			}
			time.Sleep(10 * time.Millisecond) // lint:sleep-ok polls in fake time
		}
	}
	return per
}
