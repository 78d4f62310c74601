package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// rated is a topic on home whose one producer there publishes rate
// messages/s (and no consumer: Out 0), or out messages/s delivered.
func rated(name string, home Node, in, out float64) Topic {
	c := Clients{}
	if in > 0 || out == 0 {
		c.Producers = []Client{client(home, 0, in)}
	}
	if out > 0 {
		c.Consumers = []Client{client(home, 0, out)}
	}
	return topic(name, home, 0, c)
}

// A node overloaded by load that is not its topics' must not shed them:
// moving them costs migrations and leaves it overloaded. A node its topics
// overload sheds the highest-rate ones, and never one with no rate.
func TestSheddingOnlyWhatRelievesTheNode(t *testing.T) {
	spare := func(id string, x float64) Node {
		n := node(id, x, 0)
		n.Load.CPU, n.Rate = 0.05, 10 // nearly idle
		return n
	}
	for _, tc := range []struct {
		name       string
		cpu        float64 // a's CPU
		rate       float64 // a's measured message rate (0: not measured)
		outRate    float64 // a's measured output rate
		maxOut     float64
		topics     map[string][2]float64 // name -> In, Out
		wantShed   []string
		unrelieved bool
	}{
		{name: "zero-rate topics on a node busy with connections, rate not measured",
			cpu: 0.95, topics: map[string][2]float64{"z1": {}, "z2": {}, "z3": {}}, unrelieved: true},
		{name: "zero-rate topics on a node busy with direct traffic",
			cpu: 0.95, rate: 10_000, topics: map[string][2]float64{"z1": {}, "z2": {}}, unrelieved: true},
		{name: "topics carry 3% of the load: moving them all leaves it overloaded",
			cpu: 0.95, rate: 1000, topics: map[string][2]float64{"t10": {10, 0}, "t20": {20, 0}, "z": {}}, unrelieved: true},
		{name: "half the load is the topics': shed the largest only",
			// Pooled cost: 1.05 over 220 msg/s, 0.00477 per msg/s; 21 msg/s must go.
			cpu: 0.95, rate: 200, topics: map[string][2]float64{"t30": {30, 0}, "t25": {25, 0}, "t20": {20, 0}, "t15": {15, 0}, "z": {}},
			wantShed: []string{"t30"}},
		{name: "the topics are all its load: shed until under, skip zero rate",
			// Pooled cost: 1.1 over 120 msg/s; 0.15 to shed is 16.4 msg/s: t30.
			cpu: 1.0, topics: map[string][2]float64{"t30": {30, 0}, "t25": {25, 0}, "t20": {20, 0}, "t25b": {25, 0}, "z": {}},
			wantShed: []string{"t30"}},
		{name: "output rate over by direct traffic: unrelieved",
			cpu: 0.1, outRate: 5000, maxOut: 1000, topics: map[string][2]float64{"o1": {1, 100}, "o2": {1, 100}}, unrelieved: true},
		{name: "output rate over by topics: shed output, not input-only topics",
			// out 1100 > 1000: i100 has the most rate but no output.
			cpu: 0.1, maxOut: 1000, topics: map[string][2]float64{"i2000": {2000, 0}, "o900": {1, 900}, "o200": {1, 200}},
			wantShed: []string{"o900"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := node("a", 0, 0)
			a.Load.CPU, a.Rate, a.OutRate = tc.cpu, tc.rate, tc.outRate
			snap := Snapshot{Nodes: []Node{a, spare("b", 10), spare("c", 20)}}
			for name, r := range tc.topics {
				snap.Topics = append(snap.Topics, rated(name, a, r[0], r[1]))
			}
			cfg := DefaultConfig()
			cfg.MaxOutRate = tc.maxOut
			res, _, err := Plan(snap, cfg, State{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Overloaded, []NodeID{"a"}) {
				t.Fatalf("overloaded %v, want [a]", res.Overloaded)
			}
			var shed []string
			for _, mv := range res.Moves {
				if mv.Reason != ReasonOverload || mv.From != "a" {
					t.Fatalf("unexpected move %+v", mv)
				}
				shed = append(shed, mv.Topic)
			}
			if !slices.Equal(shed, tc.wantShed) {
				t.Fatalf("shed %v, want %v", shed, tc.wantShed)
			}
			if got := slices.Equal(res.Unrelieved, []NodeID{"a"}); got != tc.unrelieved {
				t.Fatalf("unrelieved %v, want a listed: %v", res.Unrelieved, tc.unrelieved)
			}
		})
	}
}

// The shedding rule against an oracle: on small random nodes, the topics
// shed are as few as any subset that brings the node under the threshold
// (largest rates first is optimal when load is proportional to rate), none
// has a zero rate, and a node no subset can relieve sheds nothing.
func TestSheddingMatchesTheOracle(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const limit = 0.85
	relievedSome, unrelieved := 0, 0
	for trial := 0; trial < 500; trial++ {
		a := node("a", 0, 0)
		n := 1 + rng.IntN(7)
		rates := make([]float64, n)
		hosted := 0.0
		for i := range rates {
			if rng.IntN(4) > 0 {
				rates[i] = float64(1 + rng.IntN(50))
			}
			hosted += rates[i]
		}
		a.Rate = hosted * (1 + rng.Float64()*3) // the rest is direct traffic
		if rng.IntN(5) == 0 {
			a.Rate = 0 // not measured: the topics are all of it
		}
		a.Load.CPU = 0.86 + rng.Float64()*0.4
		snap := Snapshot{Nodes: []Node{a}}
		for i := range n { // idle nodes: no traffic, so a alone sets the cost per message
			b := node(fmt.Sprintf("spare%d", i), 10, float64(i))
			b.Load.CPU = 0.05
			snap.Nodes = append(snap.Nodes, b)
		}
		for i, r := range rates {
			snap.Topics = append(snap.Topics, rated(fmt.Sprintf("t%d", i), a, r, 0))
		}
		res, _, err := Plan(snap, DefaultConfig(), State{})
		if err != nil {
			t.Fatal(err)
		}
		total := max(a.Rate, hosted)
		per := a.Load.CPU / total
		// Oracle: the smallest subset whose removal gets under the limit.
		best := -1
		for mask := 0; mask < 1<<n; mask++ {
			removed, k := 0.0, 0
			for i := range rates {
				if mask&(1<<i) != 0 {
					removed += rates[i]
					k++
				}
			}
			if a.Load.CPU-per*removed <= limit && (best < 0 || k < best) {
				best = k
			}
		}
		// Shed topics were placed elsewhere or found no room (Stuck).
		shed := 0
		for _, name := range append(slices.Collect(maps.Keys(movesByTopic(res))), res.Stuck...) {
			var i int
			fmt.Sscanf(name, "t%d", &i)
			if rates[i] == 0 {
				t.Fatalf("trial %d: shed zero-rate topic %s (rates %v)", trial, name, rates)
			}
			shed++
		}
		switch {
		case best < 0:
			unrelieved++
			if shed != 0 || !slices.Equal(res.Unrelieved, []NodeID{"a"}) {
				t.Fatalf("trial %d: no subset relieves a (rates %v, cpu %.3f, rate %.1f) but shed %d, unrelieved %v",
					trial, rates, a.Load.CPU, a.Rate, shed, res.Unrelieved)
			}
		default:
			relievedSome++
			if shed != best {
				t.Fatalf("trial %d: shed %d topics, the oracle needs %d (rates %v, cpu %.3f, rate %.1f)",
					trial, shed, best, rates, a.Load.CPU, a.Rate)
			}
		}
	}
	if relievedSome < 25 || unrelieved < 25 {
		t.Fatalf("setup: %d relievable and %d unrelievable trials; want both kinds", relievedSome, unrelieved)
	}
	t.Logf("%d relievable, %d unrelievable trials", relievedSome, unrelieved)
}
