package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSummaryEstimatesBoundAllPairs(t *testing.T) {
	const seed = 3
	t.Logf("seed %d", seed)
	snap := randomSnapshot(rand.New(rand.NewPCG(seed, 0)))
	for i := range snap.Topics {
		tp := &snap.Topics[i]
		all := map[NodeID]time.Duration{}
		for _, c := range (AllPairs{}).Rank(tp, snap.Nodes).Candidates {
			all[c.Node] = c.Estimate
		}
		for _, p := range []Policy{Centroid{}, Center{}} {
			for _, c := range p.Rank(tp, snap.Nodes).Candidates {
				if c.Estimate+time.Microsecond < all[c.Node] {
					t.Fatalf("%T: %s on %s: W(t,b) %v below all-pairs %v", p, tp.Name, c.Node, c.Estimate, all[c.Node])
				}
			}
		}
	}
}

func TestRankingPutsFeasibleFirstThenByEstimate(t *testing.T) {
	a, b, c := node("a", 0, 0), node("b", 30, 0), node("c", 60, 0)
	p := node("p", 55, 0)
	tp := topic("t", Node{}, ms(20), Clients{Producers: []Client{client(p, 0, 1)}, Consumers: []Client{client(p, 0, 1)}})
	r := Centroid{}.Rank(&tp, []Node{a, b, c})
	got := fmt.Sprintln(r.Candidates[0].Node, r.Candidates[1].Node, r.Candidates[2].Node, r.Feasible, r.Scored)
	if want := "c b a 1 true\n"; got != want {
		t.Fatalf("ranking %s, want %s (%+v)", got, want, r)
	}
}

func TestEstimatesCarryAccessLatency(t *testing.T) {
	a := node("a", 0, 0)
	tp := topic("t", a, 0, Clients{
		Producers: []Client{client(a, 5*time.Millisecond, 1)},
		Consumers: []Client{client(a, 5*time.Millisecond, 1)},
	})
	if got := tp.Summary.Worst; got < ms(9.99) || got > ms(10.01) {
		t.Fatalf("E(t) %v, want 10ms (5 ms access each way)", got)
	}
	est := Centroid{}.Rank(&tp, []Node{a}).Candidates[0].Estimate
	if est < ms(9.99) || est > ms(10.01) {
		t.Fatalf("W(t,a) %v, want 10ms", est)
	}
}

func TestHashSpreadsTopicsAndIgnoresLatency(t *testing.T) {
	nodes := []Node{node("c", 0, 0), node("a", 10, 0), node("b", 20, 0)}
	count := map[NodeID]int{}
	for i := 0; i < 3000; i++ {
		tp := Topic{Name: fmt.Sprintf("topic/%d", i)}
		r := Hash{}.Rank(&tp, nodes)
		if r.Scored || r.Feasible != 3 || len(r.Candidates) != 3 {
			t.Fatalf("ranking %+v", r)
		}
		count[r.Candidates[0].Node]++
		again := Hash{}.Rank(&tp, []Node{nodes[2], nodes[0], nodes[1]})
		if again.Candidates[0] != r.Candidates[0] {
			t.Fatal("hash depends on node order")
		}
	}
	for id, n := range count {
		if n < 800 || n > 1200 {
			t.Fatalf("node %s got %d of 3000 topics: %v", id, n, count)
		}
	}
}

func TestPublisherPicksTheHeaviestProducersNode(t *testing.T) {
	a, b, c := node("a", 0, 0), node("b", 50, 0), node("c", 100, 0)
	tp := topic("t", Node{}, ms(10), Clients{
		Producers: []Client{client(a, 0, 5), client(c, 0, 9), client(b, 0, 9)},
		Consumers: []Client{client(a, 0, 1)},
	})
	if tp.Summary.Publisher != "b" {
		t.Fatalf("publisher %q, want b (rate 9, lower ID than c)", tp.Summary.Publisher)
	}
	r := Publisher{}.Rank(&tp, []Node{a, b, c})
	if r.Candidates[0].Node != "b" || r.Scored {
		t.Fatalf("ranking %+v", r)
	}
}

func TestOracleRanksByTrueLatency(t *testing.T) {
	a, b := node("a", 0, 0), node("b", 100, 0)
	// Coordinates say a is best; the truth is that b is.
	truth := func(x, y NodeID) time.Duration {
		if x == y {
			return 0
		}
		if x == "p" && y == "b" || x == "b" && y == "p" {
			return ms(1)
		}
		return ms(50)
	}
	p := node("p", 0, 0)
	tp := topic("t", Node{}, ms(20), Clients{Producers: []Client{client(p, ms(2), 1)}, Consumers: []Client{client(p, ms(2), 1)}})
	if got := (Centroid{}).Rank(&tp, []Node{a, b}).Candidates[0].Node; got != "a" {
		t.Fatalf("setup: centroid picks %s", got)
	}
	r := Oracle{Latency: truth}.Rank(&tp, []Node{a, b})
	if r.Candidates[0].Node != "b" || r.Candidates[0].Estimate != ms(6) || r.Feasible != 1 {
		t.Fatalf("oracle ranking %+v, want b at 6ms first", r)
	}
}

// A node's coordinate puts it 2*(height+adjustment) away from itself; a
// client on the candidate node must count only its access latency.
func TestClientsOnTheCandidateCountOnlyTheirAccess(t *testing.T) {
	a, b := node("a", 0, 0), node("b", 30, 0)
	a.Coord.Height, a.Coord.Adjustment = 0.004, 0.003 // self-distance 14 ms RTT
	local := Clients{Producers: []Client{client(a, ms(5), 1), client(a, ms(3), 1)}, Consumers: []Client{client(a, ms(5), 1)}}
	tp := topic("t", a, 0, local)
	if tp.Summary.Worst != ms(10) {
		t.Fatalf("E(t) %v, want 10ms: access latencies only", tp.Summary.Worst)
	}
	if s := tp.Summary.Producers; s.Node != "a" || s.Access != ms(5) || s.Count != 2 {
		t.Fatalf("producer side %+v", s)
	}
	for _, p := range []Policy{Centroid{}, AllPairs{}} {
		if c := p.Rank(&tp, []Node{a, b}).Candidates[0]; c.Node != "a" || c.Estimate != ms(10) {
			t.Fatalf("%T: best %+v, want a at 10ms", p, c)
		}
	}
	plain := Centroid{Plain: true}.Rank(&tp, []Node{a, b}).Candidates
	if est := plain[0].Estimate; est < ms(23) {
		t.Fatalf("plain centroid estimate %v: expected the 7 ms one-way self-distance on each side", est)
	}
	mixed := topic("m", a, 0, Clients{Producers: []Client{client(a, ms(5), 1), client(b, ms(5), 1)}})
	if mixed.Summary.Producers.Node != "" {
		t.Fatalf("clients on two nodes share node %q", mixed.Summary.Producers.Node)
	}
}

// Five clients at a and one at b, each publishing and subscribing: the
// centroid sits near a and its deviation is large, so W(t,b) favours a
// (true worst 100 ms); the enclosing centre sits halfway, and m (50 ms) wins.
func TestCenterBeatsCentroidOnUnevenSpread(t *testing.T) {
	a, b, m := node("a", 0, 0), node("b", 100, 0), node("m", 50, 0)
	var c Clients
	for i := 0; i < 6; i++ {
		n := a
		if i == 5 {
			n = b
		}
		c.Producers = append(c.Producers, client(n, 0, 1))
		c.Consumers = append(c.Consumers, client(n, 0, 1))
	}
	tp := topic("t", Node{}, 0, c)
	nodes := []Node{a, b, m}
	if got := (Centroid{}).Rank(&tp, nodes).Candidates[0].Node; got != "a" {
		t.Fatalf("setup: centroid picks %s", got)
	}
	best := Center{}.Rank(&tp, nodes).Candidates[0]
	if best.Node != "m" || best.Estimate < ms(49) || best.Estimate > ms(52) {
		t.Fatalf("center picks %+v, want m at about 50ms", best)
	}
	if all := (AllPairs{}).Rank(&tp, nodes).Candidates[0]; all.Node != "m" {
		t.Fatalf("all-pairs picks %+v", all)
	}
}

func TestPolicyByName(t *testing.T) {
	want := map[string]Policy{"center": Center{}, "centroid": Centroid{}, "centroid-plain": Centroid{Plain: true},
		"allpairs": AllPairs{}, "hash": Hash{}, "publisher": Publisher{}}
	for _, name := range PolicyNames {
		p, err := PolicyByName(name)
		if err != nil || p != want[name] {
			t.Errorf("%s: %#v, %v; want %#v", name, p, err, want[name])
		}
	}
	if len(PolicyNames) != len(want) {
		t.Errorf("PolicyNames %v, want the %d of the table", PolicyNames, len(want))
	}
	for _, bad := range []string{"", "oracle", "Center"} {
		if _, err := PolicyByName(bad); !errors.Is(err, ErrPolicy) {
			t.Errorf("%q: err %v, want ErrPolicy", bad, err)
		}
	}
}
