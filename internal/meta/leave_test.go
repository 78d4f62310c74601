package meta

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A leader that is about to stop hands leadership to another voter at once,
// instead of leaving the group to notice its absence after a timeout.
func TestTransferLeadershipMovesItAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		for _, m := range c.nodes {
			if m != lead {
				if moved, err := m.TransferLeadership(ctxFor(t, time.Second)); moved || err != nil {
					t.Fatalf("a follower transferred leadership: %v %v", moved, err)
				}
			}
		}
		moved, err := lead.TransferLeadership(ctxFor(t, 10*time.Second))
		if err != nil || !moved {
			t.Fatalf("transfer: %v %v", moved, err)
		}
		next := c.leader()
		if next == lead {
			t.Fatal("the old leader still leads")
		}
		if _, err := lead.Propose(ctxFor(t, 5*time.Second), registerCmd("x")); err != nil {
			t.Fatalf("the old leader cannot write through the new one: %v", err)
		}
	})
}

// Leave removes a node from the group: leadership moves first when it
// leads, the others keep a working group of two, and the last voter refuses.
func TestLeaveRemovesTheNodeAndRefusesTheLastVoter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		gone := lead.ID()
		if err := lead.Leave(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		c.close(gone)
		next := c.leader()
		vs, err := next.Voters(ctxFor(t, time.Second))
		if err != nil || len(vs) != 2 {
			t.Fatalf("voters after leave: %+v %v", vs, err)
		}
		for _, v := range vs {
			if v.ID == gone {
				t.Fatalf("%s still votes", gone)
			}
		}
		if _, err := next.Propose(ctxFor(t, 5*time.Second), registerCmd("y")); err != nil {
			t.Fatal(err)
		}

		solo := newCluster(t, 0)
		m := solo.open("n1", true, voters("n1"))
		solo.leader()
		if err := m.Leave(ctxFor(t, time.Second)); !errors.Is(err, ErrLastVoter) {
			t.Fatalf("the only voter left: %v", err)
		}
	})
}
