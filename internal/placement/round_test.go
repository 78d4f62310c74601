package placement

import (
	"errors"
	"testing"
)

// Event rounds repeat the number of the last timer round: they may move
// topics (an overload, a topic without a home, a confirmed latency move)
// but do not count towards a latency move's confirmation, so confirmation
// keeps counting timer rounds however many events arrive.
func TestRepeatedRoundDoesNotAdvanceConfirmation(t *testing.T) {
	_, _, _, snap, cfg := farTopic()
	st := State{}
	plan := func(round uint64) Result {
		t.Helper()
		s := snap
		s.Round = round
		res, next, err := Plan(s, cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		st = next
		return res
	}
	for _, round := range []uint64{1, 1, 1, 2, 2, 2, 2} {
		if res := plan(round); len(res.Moves) != 0 {
			t.Fatalf("round %d: moved %+v before 3 distinct rounds", round, res.Moves)
		}
	}
	if got := st.Streak["t"]; got.Rounds != 2 || got.Last != 2 {
		t.Fatalf("streak %+v, want 2 rounds, last 2", got)
	}
	if res := plan(3); len(res.Moves) != 1 || res.Moves[0].To != "b" {
		t.Fatalf("round 3: moves %+v, want t -> b", res.Moves)
	}
	// The moved topic cools down for Cooldown rounds, repeated or not.
	if st.LastMove["t"] != 3 {
		t.Fatalf("last move %v, want round 3", st.LastMove)
	}
	s := snap
	s.Round = 2
	if _, _, err := Plan(s, cfg, st); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("a round before the previous one: err %v, want ErrSnapshot", err)
	}
}

// An access node folds a topic's clients into one entry per side (Count,
// the largest access latency, the summed rate): E(t), the counts, the rates
// and the estimates of the centroid and all-pairs policies equal those from
// the clients themselves. The enclosing centre is approximate (its
// iterations start from another point), so Center's estimates differ a
// little, and stay upper bounds of the all-pairs estimate.
func TestFoldedClientsEstimateLikeTheClients(t *testing.T) {
	nodes := []Node{node("a", 0, 0), node("b", 40, 10), node("c", 10, 70), node("d", 90, 90)}
	var each, folded Clients
	fold := func(n Node, k int, rate float64, offset int) ([]Client, Client) {
		var cs []Client
		entry := Client{Node: n.ID, Count: k}
		for j := 0; j < k; j++ {
			c := client(n, ms(float64(1+offset+3*j)), rate)
			cs = append(cs, c)
			entry.Access = max(entry.Access, c.Access)
			entry.Rate += rate
		}
		entry.Coord = client(n, entry.Access, 0).Coord
		return cs, entry
	}
	for i, n := range nodes[:3] {
		cs, entry := fold(n, 2+i, 3, i)
		each.Producers, folded.Producers = append(each.Producers, cs...), append(folded.Producers, entry)
		cs, entry = fold(n, 5-i, 1, 2*i)
		each.Consumers, folded.Consumers = append(each.Consumers, cs...), append(folded.Consumers, entry)
	}
	home := nodes[3]
	want, err := Summarize(each, &home)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Summarize(folded, &home)
	if err != nil {
		t.Fatal(err)
	}
	if got.Worst != want.Worst || got.Rates != want.Rates ||
		got.Producers.Count != want.Producers.Count || got.Consumers.Count != want.Consumers.Count {
		t.Fatalf("folded summary %+v differs from %+v", got, want)
	}
	tw := Topic{Name: "t", Summary: want, Clients: &each}
	tg := Topic{Name: "t", Summary: got, Clients: &folded}
	pairs := AllPairs{}.Rank(&tw, nodes)
	for _, tc := range []struct {
		policy    Policy
		tolerance float64 // relative
	}{{Centroid{}, 1e-6}, {AllPairs{}, 0}, {Center{}, 0.005}} {
		rw, rg := tc.policy.Rank(&tw, nodes), tc.policy.Rank(&tg, nodes)
		for i := range rw.Candidates {
			w, g := rw.Candidates[i], rg.Candidates[i]
			d := float64(w.Estimate-g.Estimate) / float64(w.Estimate)
			if w.Node != g.Node || d < -tc.tolerance || d > tc.tolerance {
				t.Errorf("%T: candidate %d: %+v from the clients, %+v folded", tc.policy, i, w, g)
			}
			for _, p := range pairs.Candidates {
				if p.Node == g.Node && g.Estimate < p.Estimate {
					t.Errorf("%T: folded estimate %v on %s is below the all-pairs %v", tc.policy, g.Estimate, g.Node, p.Estimate)
				}
			}
		}
	}
}
