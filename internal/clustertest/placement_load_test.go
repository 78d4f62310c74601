package clustertest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/emu"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/monitor/agent"
)

// plPace publishes QoS 1 messages to topic from cl every gap until stop.
func plPace(cl *Client, topic string, gap time.Duration, stop <-chan struct{}, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = cl.TryPublish(topic, 1, false, fmt.Sprint(i))
			tm := time.NewTimer(gap)
			<-tm.C
		}
	}()
}

// TestOverloadShedsOnlyWhatRelieves: three nodes. n1 hosts four sequenced
// groups, three busy (40, 20 and 5 messages/s) and one idle, and its CPU
// is a base of 30% plus 0.9% per message/s of the groups homed (or decided
// to be homed) on it: 88.5%, over the 85% threshold. n2 is as busy (95%)
// from load that is not its groups' (direct traffic; its two groups are
// idle). The leader sheds n1's busiest group (reason overload), and only
// as many, highest rate first, as bring n1 under the threshold, also in
// the rounds after its decision, while n1's reports still show the load
// it decided away; it never sheds an idle group, and it sheds nothing from
// n2, which it reports as unrelieved. (The test's load model moves a
// group's load when it is decided: the executor that moves it is built
// separately.)
func TestOverloadShedsOnlyWhatRelieves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rates := map[string]float64{"load/hi": 40, "load/mid": 20, "load/lo": 5, "load/idle": 0, "other/a": 0, "other/b": 0}
		var c *Cluster
		var cmu sync.Mutex
		load := func(node string) float64 {
			cmu.Lock()
			cl := c
			cmu.Unlock()
			switch node {
			case "n2":
				return 0.95
			case "n1":
			default:
				return 0.10
			}
			if cl == nil {
				return 0.30
			}
			u := 0.30
			st := cl.Node(0).Node.Meta().State()
			for _, g := range st.Groups() {
				home := g.Home
				if g.Desired != nil {
					home = g.Desired.Home
				}
				if home == "n1" {
					u += 0.009 * rates[g.ID]
				}
			}
			return u
		}
		const interval = time.Second
		cl := Start(t, 3, nil, plOptions(interval, 3, 5*time.Second, load))
		cmu.Lock()
		c = cl
		cmu.Unlock()
		c.SetPolicy(fsm.Rule{Match: "load/#", Mode: fsm.Sequenced, Replicas: 1}, fsm.Rule{Match: "other/#", Mode: fsm.Sequenced, Replicas: 1})
		mgr := c.plManager()

		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer func() { close(stop); wg.Wait() }() // also when the test fails early
		for _, tp := range []string{"load/hi", "load/mid", "load/lo", "load/idle"} {
			p := c.Node(0).Connect("pub-"+tp, ConnectOptions{})
			if r := rates[tp]; r > 0 {
				plPace(p, tp, time.Duration(float64(time.Second)/r), stop, &wg)
			} else {
				p.Publish(tp, 1, false, "once") // creates the group, homed on n1
			}
		}
		for _, tp := range []string{"other/a", "other/b"} {
			p := c.Node(1).Connect("pub-"+tp, ConnectOptions{})
			p.Publish(tp, 1, false, "once")
			s := c.Node(1).Connect("sub-"+tp, ConnectOptions{})
			s.Subscribe(0, tp)
		}
		// n2's own load: direct traffic between its clients.
		dp := c.Node(1).Connect("direct-pub", ConnectOptions{})
		ds := c.Node(1).Connect("direct-sub", ConnectOptions{})
		ds.Subscribe(0, "plain/#")
		plPace(dp, "plain/x", 10*time.Millisecond, stop, &wg)

		homes := func() map[string]fsm.Group {
			out := map[string]fsm.Group{}
			for _, g := range c.Node(0).Node.Meta().State().Groups() {
				out[g.ID] = g
			}
			return out
		}
		c.Eventually("six groups, n1's four and n2's two", func() bool {
			gs := homes()
			return len(gs) == 6 && gs["load/hi"].Home == "n1" && gs["other/a"].Home == "n2"
		})
		c.Eventually("n1 found overloaded and n2 unrelieved", func() bool {
			st := mgr.Status()
			return slices.Contains(st.Overloaded, "n1") && slices.Contains(st.Unrelieved, "n2")
		})
		c.Eventually("n1's busiest group decided away", func() bool {
			g := homes()["load/hi"]
			return g.Desired != nil || g.Home != "n1"
		})
		// Let more rounds pass: n1, relieved, sheds no more; n2 sheds
		// nothing.
		var lastRound uint64
		for end := time.Now().Add(10 * interval); time.Now().Before(end); {
			if st := mgr.Status(); st.Round != lastRound {
				lastRound = st.Round
				for _, d := range st.Decisions {
					t.Logf("round %d: decision %+v; nodes %+v", st.Round, d, st.Nodes)
				}
			}
			tm := time.NewTimer(50 * time.Millisecond)
			<-tm.C
		}
		st := mgr.Status()
		var shed []string
		for id, g := range homes() {
			switch d := g.Desired; {
			case d != nil:
				if d.Reason != fsm.ReasonOverload || g.Home == d.Home {
					t.Errorf("group %s: decision %+v, want a move for overload", id, d)
				}
				shed = append(shed, id)
			case g.Home != map[bool]string{true: "n1", false: "n2"}[strings.HasPrefix(id, "load/")]:
				// Moved by the executor: an overload's move is recorded as
				// a rebalance.
				if g.HomeReason != fsm.ReasonRebalance {
					t.Errorf("group %s moved to %s for %q, want %q", id, g.Home, g.HomeReason, fsm.ReasonRebalance)
				}
				shed = append(shed, id)
			}
		}
		slices.SortFunc(shed, func(a, b string) int { return int(rates[b] - rates[a]) })
		t.Logf("shed from n1: %v; n1's CPU now %.3f; last round: overloaded %v, unrelieved %v; %d rounds, %d decisions",
			shed, load("n1"), st.Overloaded, st.Unrelieved, st.Rounds, st.Proposed)
		byRate := slices.Collect(maps.Keys(rates))
		slices.SortFunc(byRate, func(a, b string) int { return int(rates[b] - rates[a]) })
		if len(shed) == 0 || !slices.Equal(shed, byRate[:len(shed)]) {
			t.Errorf("shed %v, want the busiest groups first (%v)", shed, byRate)
		}
		for _, id := range shed {
			if rates[id] == 0 {
				t.Errorf("an idle group (%s) was shed", id)
			}
		}
		if u := load("n1"); u > 0.85 {
			t.Errorf("n1 still at %.3f after shedding %v", u, shed)
		} else if len(shed) > 0 && u+0.009*rates[shed[len(shed)-1]] <= 0.85 {
			t.Errorf("shed %v: n1 would have been under the threshold (%.3f) without the last one", shed, u+0.009*rates[shed[len(shed)-1]])
		}
		if slices.Contains(st.Overloaded, "n1") {
			t.Errorf("n1 still overloaded in the last round")
		}
		if !slices.Contains(st.Unrelieved, "n2") {
			t.Errorf("n2 not reported unrelieved: %+v", st)
		}
	})
}

// TestNoisyCoordinatesDoNotFlap: five nodes with WonderNetwork RTTs, each
// reporting its city's coordinate (Vivaldi over the dataset's matrix,
// seeded) perturbed by seeded Gaussian noise (2 ms per dimension, about
// 6 ms over the eight) drawn afresh every placement interval, so that the
// coordinates the planner sees keep moving. A group has a publisher and a
// subscriber in Chicago and in Dallas, with a latency_ms no home can meet:
// every round finds it violated, and the homes on the way between the two
// cities (Kansas City, St Louis, Des Moines: 26, 28 and 30 ms by the
// dataset) estimate about the same. With the default hysteresis (a 2 ms / 5%
// margin, 3 confirming rounds) its placement holds steady over 40 rounds;
// without it (no margin, at once, no cool-down) the same noise moves it
// again and again.
//
// The planner's input is a function of the seed and the fake clock only:
// the noise is drawn per node and per interval (not per call), and the base
// coordinates are computed here, not formed by gossip probes whose timing
// varied with the order in which goroutines ran (the earlier form of this
// test failed about one run in four, either way). Over seeds 1 to 20
// (SEXTANT_TEST_SEED) the hysteresis case makes no decision and settles on
// Kansas City in every one; without hysteresis there are 2 to 15 decisions.
// Before coords.RTT kept its estimates continuous, the embedding's large
// negative adjustments made a home's estimate jump by 20 ms when noise took
// an adjusted distance across zero, and nine seeds in twenty moved the
// group, four of them there and back.
func TestNoisyCoordinatesDoNotFlap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		confirm  int
		margin   bool
		cooldown time.Duration
	}{
		{"hysteresis", 3, true, 5 * time.Second},
		{"none", 1, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				seed := uint64(15)
				if v, err := strconv.ParseUint(os.Getenv("SEXTANT_TEST_SEED"), 10, 64); err == nil {
					seed = v
				}
				t.Logf("noise seed %d (SEXTANT_TEST_SEED sets another)", seed)
				cities := []string{"Chicago", "Dallas", "Kansas City", "St Louis", "Des Moines"}
				rtt := plCityRTTs(t, cities)
				m := &emu.Matrix{Names: cities, RTT: make([][]float64, len(cities))}
				for i := range rtt {
					m.RTT[i] = make([]float64, len(cities))
					for j, d := range rtt[i] {
						m.RTT[i][j] = float64(d) / float64(time.Millisecond)
					}
				}
				base, err := emu.Embed(m, emu.VivaldiConfig{Rounds: 2000, Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				const interval = time.Second
				const coordNoise = 2 * time.Millisecond
				opts := plOptions(interval, tc.confirm, tc.cooldown, nil)
				c := Start(t, len(cities), rtt, opts, func(o *Options) {
					prevAgent := o.Placement
					o.Placement = func(node string, a *agent.Config) {
						prevAgent(node, a)
						idx := -1
						for i := range base {
							if nodeName(i) == node {
								idx = i
							}
						}
						if idx < 0 {
							t.Errorf("node %q: no city", node)
							return
						}
						own := base[idx]
						a.Coordinate = func() *coordinate.Coordinate {
							co := own.Clone()
							slot := uint64(time.Now().UnixNano() / int64(interval))
							nrng := rand.New(rand.NewPCG(seed, uint64(idx+1)<<40^slot))
							for i := range co.Vec {
								co.Vec[i] += coordNoise.Seconds() * nrng.NormFloat64()
							}
							return co
						}
					}
					prev := o.Config
					o.Config = func(cfg *config.Config) {
						prev(cfg)
						if !tc.margin {
							cfg.PlacementMargin, cfg.PlacementMarginPc = 0, 0
						}
					}
				})
				c.SetPolicy(fsm.Rule{Match: "noisy/#", Mode: fsm.Sequenced, Replicas: 1, LatencyMS: 1})
				mgr := c.plManager()

				stop := make(chan struct{})
				var wg sync.WaitGroup
				defer func() { close(stop); wg.Wait() }() // also when the test fails early
				for i := range 2 {
					sub := c.Node(i).Connect(fmt.Sprint("sub", i), ConnectOptions{})
					sub.Subscribe(0, "noisy/#")
					pub := c.Node(i).Connect(fmt.Sprint("pub", i), ConnectOptions{})
					plPace(pub, "noisy/t", 100*time.Millisecond, stop, &wg)
				}
				c.Eventually("the group watched and violated", func() bool {
					gs, ok := plGroup(mgr.Status(), "noisy/t")
					return ok && gs.Violated && gs.Producers > 0 && gs.Consumers > 0
				})
				// Its first home is a publisher's node (whichever published
				// first); the first rounds move it towards the best home
				// (with hysteresis, a move takes 3 rounds and a cool-down).
				// Count from then on.
				warm := time.NewTimer(20 * interval)
				<-warm.C
				first := mgr.Status()
				var homes []string
				last := ""
				var made []string // the decisions, as "round: from -> to (estimate, worst on from)"
				lastRound := first.Round
				for range 40 {
					tm := time.NewTimer(interval)
					<-tm.C
					if st := mgr.Status(); st.Round != lastRound {
						lastRound = st.Round
						for _, d := range st.Decisions {
							made = append(made, fmt.Sprintf("%d: %s -> %s (%v, %v)", st.Round, d.From, d.To, d.Estimate, d.Worst))
						}
					}
					if g, ok := plGroupOf(c.Node(0), "noisy/t"); ok {
						h := g.Home
						if g.Desired != nil {
							h = g.Desired.Home
						}
						if h != last {
							homes = append(homes, h)
							last = h
						}
					}
				}
				st := mgr.Status()
				decisions := st.Proposed - first.Proposed
				t.Logf("%s: %d decisions over %d rounds after warm-up; homes in turn %v; decisions seen %v", tc.name, decisions, st.Rounds-first.Rounds, homes, made)
				switch tc.name {
				case "hysteresis":
					if decisions > 1 {
						t.Errorf("%d decisions over 40 rounds of noise: placement flaps", decisions)
					}
					if kc := nodeName(2); last != kc {
						t.Errorf("the group settled on %s, not on Kansas City (%s), the best home by the dataset", last, kc)
					}
				case "none":
					if decisions < 3 {
						t.Errorf("only %d decisions without hysteresis: the noise is too weak for this test to show anything", decisions)
					}
				}
			})
		})
	}
}
