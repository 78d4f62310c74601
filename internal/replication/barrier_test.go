package replication

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestBarrier: on the leader, Barrier returns with every acknowledged
// command applied; on a follower it is a *NotLeaderError; on a leader cut
// off from its followers it fails instead of vouching for a state the
// majority may have moved past.
func TestBarrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.start(ids(3)...)
		leadID, lead := c.leader()
		if _, err := proposeAll(ctxFor(t, 5*time.Second), lead, []string{"a1", "a2"}); err != nil {
			t.Fatal(err)
		}
		if err := lead.Barrier(ctxFor(t, 5*time.Second)); err != nil {
			t.Fatalf("barrier on the leader: %v", err)
		}
		if got := c.fsms[leadID].cmds(); !slices.Equal(got, []string{"a1", "a2"}) {
			t.Fatalf("leader applied %v after the barrier", got)
		}
		for id, g := range c.groups {
			if id == leadID {
				continue
			}
			var nl *NotLeaderError
			if err := g.Barrier(ctxFor(t, time.Second)); !errors.As(err, &nl) {
				t.Fatalf("barrier on follower %s: %v", id, err)
			}
		}
		for id := range c.groups {
			if id != leadID {
				c.nw.Partition(host(leadID), host(id))
			}
		}
		short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := lead.Barrier(short); err == nil {
			t.Fatal("a leader cut off from its followers passed a barrier")
		}
		c.nw.HealAll()
	})
}
