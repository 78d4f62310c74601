package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// Three nodes on a line; the topic's producer and consumer sit near C but it
// lives on A. B and C are feasible, C has the lowest W(t,b).
func TestViolatedTopicMovesToFeasibleNodeWithLowestW(t *testing.T) {
	a, b, c := node("a", 0, 0), node("b", 60, 0), node("c", 100, 0)
	p, q := node("p", 90, 0), node("q", 110, 0) // not candidate homes, only client sites
	tp := topic("t", a, ms(40), Clients{
		Producers: []Client{client(p, 0, 10)},
		Consumers: []Client{client(q, 0, 10)},
	})
	if tp.Summary.Worst <= tp.Threshold {
		t.Fatalf("setup: E(t) %v is not over Lth %v", tp.Summary.Worst, tp.Threshold)
	}
	res, _, err := Plan(Snapshot{Nodes: []Node{a, b, c}, Topics: []Topic{tp}}, immediate(), State{})
	if err != nil {
		t.Fatal(err)
	}
	want := Move{Topic: "t", From: "a", To: "c", Reason: ReasonLatency, Estimate: ms(10)}
	if len(res.Moves) != 1 || !near(res.Moves[0], want) {
		t.Fatalf("moves %+v, want [%+v]", res.Moves, want)
	}
}

// immediate is the default configuration without move confirmation.
func immediate() Config {
	cfg := DefaultConfig()
	cfg.Confirm = 1
	return cfg
}

func near(got, want Move) bool {
	d := got.Estimate - want.Estimate
	got.Estimate, want.Estimate = 0, 0
	return got == want && d > -time.Microsecond && d < time.Microsecond
}

func TestPlacementSkipsNodesThatWouldOverload(t *testing.T) {
	a, b, c := node("a", 0, 0), node("b", 60, 0), node("c", 100, 0)
	c.Load.CPU = 0.84 // c's traffic is what makes it busy: one more topic tips it over
	busy := topic("busy", c, 0, Clients{Producers: []Client{client(c, 0, 100)}})
	p := node("p", 100, 0)
	tp := topic("t", a, ms(60), Clients{
		Producers: []Client{client(p, 0, 10)},
		Consumers: []Client{client(p, 0, 10)},
	})
	res, _, err := Plan(Snapshot{Nodes: []Node{a, b, c}, Topics: []Topic{busy, tp}}, immediate(), State{})
	if err != nil {
		t.Fatal(err)
	}
	if m := movesByTopic(res); len(res.Moves) != 1 || m["t"].To != "b" {
		t.Fatalf("moves %+v, want t -> b (c would overload)", res.Moves)
	}
}

// A node at 100% CPU with topics of rates 30, 25, 25 and 20 must shed 55% of
// its rate to get under a 50% threshold: the 30 and then one 25 (by name).
func TestOverloadedNodeShedsHighestRateTopicsUntilUnderThreshold(t *testing.T) {
	a, b, c := node("a", 0, 0), node("b", 10, 0), node("c", 0, 10)
	a.Load.CPU, b.Load.CPU, c.Load.CPU = 1.0, 0.05, 0.05
	var topics []Topic
	for _, x := range []struct {
		name string
		rate float64
	}{{"t20", 20}, {"t25b", 25}, {"t25a", 25}, {"t30", 30}} {
		topics = append(topics, topic(x.name, a, 0, Clients{Producers: []Client{client(a, 0, x.rate)}}))
	}
	cfg := DefaultConfig()
	cfg.Overload = 0.5
	res, _, err := Plan(Snapshot{Nodes: []Node{a, b, c}, Topics: topics}, cfg, State{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Overloaded, []NodeID{"a"}) {
		t.Fatalf("overloaded %v, want [a]", res.Overloaded)
	}
	m := movesByTopic(res)
	if len(m) != 2 || m["t30"].Reason != ReasonOverload || m["t25a"].Reason != ReasonOverload {
		t.Fatalf("moves %+v, want t30 and t25a shed", res.Moves)
	}
	// b and c each take one: b (10 ms away, per-message cost of a) would go
	// over 50% with both.
	if m["t30"].To == m["t25a"].To {
		t.Fatalf("both shed topics went to %s", m["t30"].To)
	}
}

func TestOutputRateThresholdSheds(t *testing.T) {
	a, b := node("a", 0, 0), node("b", 10, 0)
	big := topic("big", a, 0, Clients{Consumers: []Client{client(a, 0, 900)}})
	small := topic("small", a, 0, Clients{Consumers: []Client{client(a, 0, 200)}})
	cfg := DefaultConfig()
	cfg.MaxOutRate = 1000
	res, _, err := Plan(Snapshot{Nodes: []Node{a, b}, Topics: []Topic{big, small}}, cfg, State{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moves) != 1 || res.Moves[0].Topic != "big" || res.Moves[0].To != "b" {
		t.Fatalf("moves %+v, want big -> b", res.Moves)
	}
}

func TestTopicWithNoFeasibleNodeGoesToTheLeastBad(t *testing.T) {
	a, b, c := node("a", 0, 0), node("b", 60, 0), node("c", 200, 0)
	p, q := node("p", 40, 0), node("q", 120, 0)
	c2 := Clients{Producers: []Client{client(p, 0, 1)}, Consumers: []Client{client(q, 0, 1)}}
	for _, home := range []Node{a, {}} { // violated on a; and without a home
		tp := topic("t", home, ms(5), c2)
		res, _, err := Plan(Snapshot{Nodes: []Node{a, b, c}, Topics: []Topic{tp}}, immediate(), State{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Moves) != 1 || res.Moves[0].To != "b" {
			t.Fatalf("home %q: moves %+v, want -> b", home.ID, res.Moves)
		}
	}
}

func TestUnplacedTopicIsForcedWhenEveryNodeIsFull(t *testing.T) {
	a := node("a", 0, 0)
	a.Load.CPU = 0.99
	tp := topic("t", Node{}, 0, Clients{Producers: []Client{client(a, 0, 1)}})
	res, _, err := Plan(Snapshot{Nodes: []Node{a}, Topics: []Topic{tp}}, DefaultConfig(), State{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moves) != 1 || !res.Moves[0].Forced || res.Moves[0].To != "a" {
		t.Fatalf("moves %+v, want a forced placement on a", res.Moves)
	}
}

func TestShedTopicWithNowhereToGoIsStuck(t *testing.T) {
	a, b := node("a", 0, 0), node("b", 10, 0)
	a.Load.CPU, b.Load.CPU = 0.95, 0.95
	ta := topic("ta", a, 0, Clients{Producers: []Client{client(a, 0, 10)}})
	tb := topic("tb", b, 0, Clients{Producers: []Client{client(b, 0, 10)}})
	res, _, err := Plan(Snapshot{Nodes: []Node{a, b}, Topics: []Topic{ta, tb}}, DefaultConfig(), State{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moves) != 0 || !reflect.DeepEqual(res.Stuck, []string{"ta", "tb"}) {
		t.Fatalf("moves %+v stuck %v, want none and [ta tb]", res.Moves, res.Stuck)
	}
}

// flapWorld: two nodes equally good for a topic whose clients sit between
// them; every round the coordinates wobble by up to ±noise, so E(t) hovers
// around Lth and the better node changes from round to round.
func runNoisy(t *testing.T, cfg Config, rounds int, seed uint64) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	const noise = 1.0 // ms
	wob := func(x float64) float64 { return x + (rng.Float64()*2-1)*noise }
	home := NodeID("a")
	state := State{}
	moves := 0
	for r := 0; r < rounds; r++ {
		a, b := node("a", wob(0), wob(0)), node("b", wob(40), wob(0))
		p, q := node("p", wob(20), wob(10)), node("q", wob(20), wob(-10))
		homeNode := a
		if home == "b" {
			homeNode = b
		}
		tp := topic("t", homeNode, ms(22), Clients{
			Producers: []Client{client(p, 0, 1)}, Consumers: []Client{client(q, 0, 1)},
		})
		res, next, err := Plan(Snapshot{Nodes: []Node{a, b}, Topics: []Topic{tp}}, cfg, state)
		if err != nil {
			t.Fatal(err)
		}
		state = next
		for _, mv := range res.Moves {
			moves++
			home = mv.To
		}
	}
	return moves
}

func TestHysteresisPreventsFlipFlopOnNoisyInput(t *testing.T) {
	const seed, rounds = 11, 300
	t.Logf("seed %d", seed)
	noHysteresis := Config{Policy: Centroid{}}
	if flaps := runNoisy(t, noHysteresis, rounds, seed); flaps < 10 {
		t.Fatalf("setup: without hysteresis only %d moves in %d rounds; the input is not noisy enough", flaps, rounds)
	}
	if moves := runNoisy(t, DefaultConfig(), rounds, seed); moves > 1 {
		t.Fatalf("with hysteresis: %d moves in %d rounds, want at most 1", moves, rounds)
	}
}

// farTopic is a topic on a whose clients are all on b, 100 ms away, with
// Lth 10 ms: a latency move to b, waiting for 3 rounds of confirmation.
func farTopic() (a, b Node, c Clients, snap Snapshot, cfg Config) {
	a, b = node("a", 0, 0), node("b", 100, 0)
	c = Clients{Producers: []Client{client(b, 0, 1)}, Consumers: []Client{client(b, 0, 1)}}
	snap = Snapshot{Nodes: []Node{a, b}, Topics: []Topic{topic("t", a, ms(10), c)}}
	cfg = DefaultConfig()
	cfg.Confirm = 3
	return a, b, c, snap, cfg
}

func TestLatencyMoveWaitsForConfirmation(t *testing.T) {
	a, b, c, snap, cfg := farTopic()
	st := State{}
	for round := 1; round <= 3; round++ {
		res, next, err := Plan(snap, cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		st = next
		if moved := len(res.Moves) == 1 && res.Moves[0].To == "b"; moved != (round == 3) {
			t.Fatalf("round %d: moves %+v", round, res.Moves)
		}
	}
	// A round without the indication resets the streak.
	st = State{Round: 7, Streak: map[string]Streak{"t": {To: "b", Rounds: 2}}}
	calm := Snapshot{Nodes: []Node{a, b}, Topics: []Topic{topic("t", a, 0, c)}} // no threshold: no violation
	if _, next, _ := Plan(calm, cfg, st); next.Streak != nil {
		t.Fatalf("streak survived a calm round: %+v", next.Streak)
	}
}

func TestCooldownHoldsAMovedTopic(t *testing.T) {
	a, b, c := node("a", 0, 0), node("b", 100, 0), node("c", 200, 0)
	near := func(n Node) Clients {
		return Clients{Producers: []Client{client(n, 0, 1)}, Consumers: []Client{client(n, 0, 1)}}
	}
	cfg := DefaultConfig()
	cfg.Cooldown, cfg.Confirm = 3, 1
	// Round 1: violated on a, clients at b: moves to b.
	res, st, err := Plan(Snapshot{Nodes: []Node{a, b, c}, Topics: []Topic{topic("t", a, ms(10), near(b))}}, cfg, State{})
	if err != nil || len(res.Moves) != 1 || res.Moves[0].To != "b" {
		t.Fatalf("round 1: %+v %v", res.Moves, err)
	}
	// The clients jump to c at once: the topic must wait out its cool-down.
	for round := 2; round <= 5; round++ {
		res, st, err = Plan(Snapshot{Nodes: []Node{a, b, c}, Topics: []Topic{topic("t", b, ms(10), near(c))}}, cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		moved := len(res.Moves) == 1 && res.Moves[0].To == "c"
		if want := round == 5; moved != want {
			t.Fatalf("round %d: moves %+v, want moved=%v", round, res.Moves, want)
		}
	}
	if len(st.LastMove) != 1 || st.LastMove["t"] != 5 {
		t.Fatalf("state %+v", st)
	}
}

func randomSnapshot(rng *rand.Rand) Snapshot {
	var s Snapshot
	for i := 0; i < 8; i++ {
		n := node(fmt.Sprintf("n%d", i), rng.Float64()*100, rng.Float64()*100)
		n.Load.CPU = rng.Float64()
		s.Nodes = append(s.Nodes, n)
	}
	for i := 0; i < 60; i++ {
		var c Clients
		for k := 0; k < 1+rng.IntN(4); k++ {
			c.Producers = append(c.Producers, client(s.Nodes[rng.IntN(8)], ms(rng.Float64()*5), float64(rng.IntN(5))))
		}
		for k := 0; k < 1+rng.IntN(6); k++ {
			c.Consumers = append(c.Consumers, client(s.Nodes[rng.IntN(8)], ms(rng.Float64()*5), float64(rng.IntN(5))))
		}
		home := Node{}
		if rng.IntN(4) > 0 {
			home = s.Nodes[rng.IntN(8)]
		}
		s.Topics = append(s.Topics, topic(fmt.Sprintf("t%02d", i), home, ms(30+rng.Float64()*40), c))
	}
	return s
}

func TestPlanIsDeterministic(t *testing.T) {
	const seed = 5
	t.Logf("seed %d", seed)
	snap := randomSnapshot(rand.New(rand.NewPCG(seed, 0)))
	prev := State{Round: 3, LastMove: map[string]uint64{"t01": 3, "t02": 1}}
	for _, policy := range []Policy{Centroid{}, Center{}, AllPairs{}, Hash{}, Publisher{}} {
		cfg := DefaultConfig()
		cfg.Policy = policy
		want, wantState, err := Plan(snap, cfg, prev)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Moves) == 0 {
			t.Fatalf("%T: setup produced no moves", policy)
		}
		shuffled := Snapshot{Nodes: append([]Node(nil), snap.Nodes...), Topics: append([]Topic(nil), snap.Topics...)}
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := 0; i < 20; i++ {
			got, gotState, err := Plan(snap, cfg, prev)
			if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotState, wantState) {
				t.Fatalf("%T: run %d differs", policy, i)
			}
			rng.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
			rng.Shuffle(len(shuffled.Topics), func(i, j int) { shuffled.Topics[i], shuffled.Topics[j] = shuffled.Topics[j], shuffled.Topics[i] })
			got, gotState, err = Plan(shuffled, cfg, prev)
			if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotState, wantState) {
				t.Fatalf("%T: shuffled input %d gives a different plan", policy, i)
			}
		}
		if prev.LastMove["t01"] != 3 || len(prev.LastMove) != 2 {
			t.Fatal("Plan modified the previous state")
		}
	}
}

func TestPlanRejectsBadSnapshots(t *testing.T) {
	a := node("a", 0, 0)
	for name, s := range map[string]Snapshot{
		"duplicate node":  {Nodes: []Node{a, a}},
		"nil coordinate":  {Nodes: []Node{{ID: "x"}}},
		"mixed dims":      {Nodes: []Node{a, {ID: "b", Coord: at(1, 1)}}, Topics: []Topic{{Name: "t", Summary: Summary{Producers: Side{Centroid: nodeCoord3()}}}}},
		"no nodes":        {Topics: []Topic{{Name: "t"}}},
		"duplicate topic": {Nodes: []Node{a}, Topics: []Topic{{Name: "t"}, {Name: "t"}}},
		"negative rate":   {Nodes: []Node{a}, Topics: []Topic{{Name: "t", Summary: Summary{Rates: Rates{In: -1}}}}},
	} {
		if _, _, err := Plan(s, DefaultConfig(), State{}); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: err %v, want ErrSnapshot", name, err)
		}
	}
}

func nodeCoord3() *coordinate.Coordinate { return &coordinate.Coordinate{Vec: []float64{0, 0, 0}} }
