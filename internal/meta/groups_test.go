package meta

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// TestGroupRecords: concurrent creators of one group through different
// nodes agree on one record; set-home with a stale epoch is refused with
// the current record; every write is readable on the proposing node at
// once and on the others after Wait.
func TestGroupRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		ids := []string{"n1", "n2", "n3"}
		for _, id := range ids {
			c.open(id, true, voters(ids...))
		}
		lead := c.leader()
		for _, id := range ids {
			if _, err := lead.Propose(ctxFor(t, 5*time.Second), registerCmd(id)); err != nil {
				t.Fatal(err)
			}
		}
		created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		recs := make([]fsm.Group, len(ids))
		news := make([]bool, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() {
				// Each node proposes itself as the home.
				g := fsm.Group{ID: "swarm/7", Rule: "swarm/+/telemetry", Home: id, Voters: []string{id}, Created: created}
				rec, isNew, err := c.nodes[id].CreateGroup(ctxFor(t, 10*time.Second), g)
				if err != nil {
					t.Errorf("%s: create: %v", id, err)
				}
				recs[i], news[i] = rec, isNew
				if got, ok := c.nodes[id].State().Group("swarm/7"); !ok || got.Home != rec.Home {
					t.Errorf("%s: own copy %+v %v after create, want home %s", id, got, ok, rec.Home)
				}
			})
		}
		wg.Wait()
		if n := len(slices.DeleteFunc(slices.Clone(news), func(b bool) bool { return !b })); n != 1 {
			t.Fatalf("%d creators were told they created the group, want 1", n)
		}
		for i := range recs {
			if recs[i].Home != recs[0].Home || recs[i].Epoch != 1 {
				t.Fatalf("creators disagree: %+v vs %+v", recs[i], recs[0])
			}
		}
		home := recs[0].Home
		var other string
		for _, id := range ids {
			if id != home {
				other = id
			}
		}
		// Grow the group, then move its home.
		m := c.nodes[other]
		rec, err := m.SetGroupMembers(ctxFor(t, 5*time.Second), fsm.MembersChange{Group: "swarm/7", Epoch: 1, Voters: []string{home, other}})
		if err != nil || len(rec.Voters) != 2 {
			t.Fatalf("set members: %+v, %v", rec, err)
		}
		rec, err = m.SetGroupHome(ctxFor(t, 5*time.Second), fsm.HomeChange{Group: "swarm/7", Home: other, Epoch: 2, Reason: fsm.ReasonFailover, At: created.Add(time.Hour)})
		if err != nil || rec.Home != other || rec.Epoch != 2 {
			t.Fatalf("set home: %+v, %v", rec, err)
		}
		rec, err = c.nodes[home].SetGroupHome(ctxFor(t, 5*time.Second), fsm.HomeChange{Group: "swarm/7", Home: home, Epoch: 2, Reason: fsm.ReasonManual, At: created.Add(time.Hour)})
		if !errors.Is(err, fsm.ErrConflict) || rec.Home != other || rec.Epoch != 2 {
			t.Fatalf("stale set home: %+v, %v; want a conflict with the current record", rec, err)
		}
		for _, n := range c.nodes {
			if err := n.Wait(ctxFor(t, 5*time.Second), lead.State().Applied()); err != nil {
				t.Fatal(err)
			}
			if g, ok := n.State().Group("swarm/7"); !ok || g.Home != other || g.HomeReason != fsm.ReasonFailover {
				t.Errorf("%s reads %+v", n.ID(), g)
			}
		}
		if err := m.DeleteGroup(ctxFor(t, 5*time.Second), "swarm/7"); err != nil {
			t.Fatal(err)
		}
		if err := m.DeleteGroup(ctxFor(t, 5*time.Second), "swarm/7"); !errors.Is(err, fsm.ErrNotFound) {
			t.Errorf("second delete: %v, want not found", err)
		}
		if _, ok := m.State().Group("swarm/7"); ok {
			t.Error("deleted group still readable on the proposer")
		}
	})
}
