package manager

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/placement"
)

func defaultPlanner(t testing.TB) placement.Config {
	t.Helper()
	pc, err := PlannerConfig("center", 85, 0, 2*time.Millisecond, 5, 3, 30*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// stepper drives rounds directly, on a manual clock.
type stepper struct {
	m   *Manager
	clk *clocktest.Manual
	st  runState
}

func newStepper(t *testing.T, f *fakeMeta, pc placement.Config) *stepper {
	t.Helper()
	clk := clocktest.New(t0)
	m, err := New(Config{Interval: 5 * time.Second, Planner: pc, Clock: clk}, f)
	if err != nil {
		t.Fatal(err)
	}
	return &stepper{m: m, clk: clk}
}

// round advances the clock an interval and runs a timer round.
func (s *stepper) round() Status {
	s.clk.Advance(5 * time.Second)
	s.m.round(context.Background(), &s.st, false)
	return s.m.Status()
}

// A group whose clients are all far from its home violates its threshold;
// after the move is confirmed over three rounds the manager records a
// decision to the node next to the clients, and on it E(t) is under Lth.
func TestViolationIsDecidedAfterConfirmation(t *testing.T) {
	f := newWorld(t, 20, []string{"a", "b", "c"}, map[string]string{"swarm/7/pos": "a"})
	s := newStepper(t, f, defaultPlanner(t))
	ra := &reporter{node: "a", coord: at(0, 0), load: monitor.Load{CPU: 0.1}}
	rb := &reporter{node: "b", coord: at(50, 0), load: monitor.Load{CPU: 0.1}}
	rc := &reporter{node: "c", coord: at(100, 0), load: monitor.Load{CPU: 0.1}}
	for round := 1; round <= 3; round++ {
		ra.send(t, s.m)
		rb.send(t, s.m)
		rc.send(t, s.m, clients("swarm/7/pos", 4, 3, 2, 10))
		st := s.round()
		if len(st.Groups) != 1 || !st.Groups[0].Violated || st.Groups[0].Home != "a" {
			t.Fatalf("round %d: groups %+v, want swarm/7/pos violated on a", round, st.Groups)
		}
		if got := len(f.decisions()); got != map[int]int{1: 0, 2: 0, 3: 1}[round] {
			t.Fatalf("round %d: %d decisions", round, got)
		}
	}
	d := f.decisions()[0]
	if d.Group != "swarm/7/pos" || d.Home != "c" || !slices.Equal(d.Voters, []string{"c"}) || d.Reason != fsm.ReasonViolation || d.Epoch != 1 {
		t.Fatalf("decision %+v", d)
	}
	g, _ := f.State().Group("swarm/7/pos")
	if g.Desired == nil || g.Desired.Home != "c" {
		t.Fatalf("record %+v", g)
	}
	// The next round plans the group on its desired home: E(t) under Lth,
	// and no further decision.
	ra.send(t, s.m)
	rb.send(t, s.m)
	rc.send(t, s.m, clients("swarm/7/pos", 4, 3, 2, 10))
	st := s.round()
	if gs := st.Groups[0]; gs.Home != "c" || gs.Violated || gs.Worst > gs.Threshold || gs.Producers != 4 || gs.Consumers != 3 {
		t.Fatalf("after the decision: %+v", gs)
	}
	if len(f.decisions()) != 1 {
		t.Fatalf("decided again: %+v", f.decisions())
	}
	// One violation, seen over three rounds, counted once; the group's
	// status names its topic.
	if st.Rounds != 4 || st.Violations != 1 || !slices.Equal(st.Groups[0].Topics, []string{"swarm/7/pos"}) {
		t.Fatalf("rounds %d, violations %d, topics %v; want 4, 1, [swarm/7/pos]", st.Rounds, st.Violations, st.Groups[0].Topics)
	}
}

// An overloaded home sheds its busy group and keeps its idle one; a home
// overloaded by its connections and direct traffic sheds nothing.
func TestOverloadShedsTheBusyGroupOnly(t *testing.T) {
	for _, tc := range []struct {
		name           string
		msgIn, msgOut  float64 // a's whole traffic
		wantDecision   bool
		wantUnrelieved bool
	}{
		{name: "the topics are most of the load", msgIn: 400, msgOut: 400, wantDecision: true},
		{name: "connections and direct traffic are the load", msgIn: 50_000, msgOut: 50_000, wantUnrelieved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newWorld(t, 0, []string{"a", "b", "c"}, map[string]string{"swarm/busy": "a", "swarm/idle": "a"})
			s := newStepper(t, f, defaultPlanner(t))
			(&reporter{node: "a", coord: at(0, 0), load: monitor.Load{CPU: 0.95, MsgIn: tc.msgIn, MsgOut: tc.msgOut}}).send(t, s.m,
				clients("swarm/busy", 3, 2, 1, 300))
			(&reporter{node: "b", coord: at(10, 0), load: monitor.Load{CPU: 0.05, MsgIn: 10, MsgOut: 10}}).send(t, s.m)
			(&reporter{node: "c", coord: at(20, 0), load: monitor.Load{CPU: 0.05, MsgIn: 10, MsgOut: 10}}).send(t, s.m)
			st := s.round()
			ds := f.decisions()
			if !slices.Equal(st.Overloaded, []string{"a"}) || slices.Equal(st.Unrelieved, []string{"a"}) != tc.wantUnrelieved {
				t.Fatalf("overloaded %v, unrelieved %v", st.Overloaded, st.Unrelieved)
			}
			if !tc.wantDecision {
				if len(ds) != 0 {
					t.Fatalf("decisions %+v, want none", ds)
				}
				return
			}
			if len(ds) != 1 || ds[0].Group != "swarm/busy" || ds[0].Reason != fsm.ReasonOverload || ds[0].Home == "a" {
				t.Fatalf("decisions %+v, want swarm/busy shed from a", ds)
			}
		})
	}
}

// A group whose home left the registry is placed anew (rebalance); one
// whose home has not reported lately is left to the failover.
func TestGroupsWithoutAHome(t *testing.T) {
	f := newWorld(t, 0, []string{"a", "b", "c"}, map[string]string{"swarm/1": "a", "swarm/2": "c"})
	s := newStepper(t, f, defaultPlanner(t))
	(&reporter{node: "b", coord: at(10, 0)}).send(t, s.m, clients("swarm/1", 1, 1, 1, 1), clients("swarm/2", 1, 1, 1, 1))
	(&reporter{node: "c", coord: at(20, 0)}).send(t, s.m)
	if _, err := f.Propose(context.Background(), fsm.RemoveNode("a")); err != nil {
		t.Fatal(err)
	}
	s.clk.Advance(20 * time.Second) // c's report goes stale; b reports again
	(&reporter{node: "b", coord: at(10, 0), seq: 1}).send(t, s.m, clients("swarm/1", 1, 1, 1, 1), clients("swarm/2", 1, 1, 1, 1))
	st := s.round()
	ds := f.decisions()
	if len(ds) != 1 || ds[0].Group != "swarm/1" || ds[0].Home != "b" || ds[0].Reason != fsm.ReasonRebalance {
		t.Fatalf("decisions %+v, want swarm/1 -> b (rebalance)", ds)
	}
	if st.Unmonitored != 1 || len(st.Nodes) != 1 {
		t.Fatalf("status: %d unmonitored, nodes %+v; want swarm/2 left out, b the only candidate", st.Unmonitored, st.Nodes)
	}
}

// Noisy coordinates do not make placement flap: two homes equally good for
// a group over its threshold, every node's coordinate jittered by up to
// 1 ms per report. With the default hysteresis the manager decides at most
// once; without it, it keeps changing its mind.
func TestNoisyCoordinatesDoNotFlap(t *testing.T) {
	const seed, rounds = 23, 150
	t.Logf("seed %d", seed)
	// E(t) is about 37 ms on a and on b; the clients' own nodes, p and q,
	// are nearer but overloaded: no node meets Lth, and a and b are equally
	// good, one or the other by the noise.
	const lth = 30
	run := func(pc placement.Config) int {
		rng := rand.New(rand.NewPCG(seed, 0))
		wob := func(x float64) float64 { return x + (rng.Float64()*2-1)*1.0 }
		f := newWorld(t, lth, []string{"a", "b", "p", "q"}, map[string]string{"swarm/g": "a"})
		s := newStepper(t, f, pc)
		busy := monitor.Load{CPU: 0.9} // the clients' own nodes cannot host
		ra, rb := &reporter{node: "a"}, &reporter{node: "b"}
		rp, rq := &reporter{node: "p", load: busy}, &reporter{node: "q", load: busy}
		for range rounds {
			ra.coord, rb.coord = at(wob(0), wob(0)), at(wob(40), wob(0))
			rp.coord, rq.coord = at(wob(20), wob(30)), at(wob(20), wob(-30))
			ra.send(t, s.m)
			rb.send(t, s.m)
			rp.send(t, s.m, clients("swarm/g", 2, 0, 1, 5))
			rq.send(t, s.m, clients("swarm/g", 0, 2, 1, 5))
			s.round()
		}
		return len(f.decisions())
	}
	if flaps := run(placement.Config{Policy: placement.Center{}}); flaps < 10 {
		t.Fatalf("setup: without hysteresis only %d decisions in %d rounds; the input is not noisy enough", flaps, rounds)
	} else {
		t.Logf("without hysteresis: %d decisions in %d rounds", flaps, rounds)
	}
	if n := run(defaultPlanner(t)); n > 1 {
		t.Fatalf("with hysteresis: %d decisions in %d rounds, want at most 1", n, rounds)
	}
}

// A new leader keeps the groups that moved lately cooling for what is
// left of their cool-down.
func TestNewLeaderRebuildsCooldowns(t *testing.T) {
	f := newWorld(t, 20, []string{"a", "b", "c"}, map[string]string{"swarm/1": "a", "swarm/2": "a"})
	now := t0.Add(time.Hour)
	// swarm/1 was decided 12 s ago; swarm/2 moved 40 s ago (cool-down 30 s).
	for _, cmd := range []fsm.Command{
		fsm.SetGroupDesired(fsm.DesiredChange{Group: "swarm/1", Epoch: 1, Home: "b", Voters: []string{"b"}, Reason: fsm.ReasonViolation, At: now.Add(-12 * time.Second)}),
		fsm.SetGroupMembers(fsm.MembersChange{Group: "swarm/2", Epoch: 1, Voters: []string{"a", "b"}}),
		fsm.SetGroupHome(fsm.HomeChange{Group: "swarm/2", Home: "b", Epoch: 2, Reason: fsm.ReasonMigration, At: now.Add(-40 * time.Second)}),
	} {
		if _, err := f.Propose(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Config{Interval: 5 * time.Second, Planner: defaultPlanner(t)}, f)
	if err != nil {
		t.Fatal(err)
	}
	st := m.seed(f.State(), now)
	// Cool-down 6 rounds; 12 s is 2 whole intervals: 4 rounds left.
	if st.Round != 6 || len(st.LastMove) != 1 || st.LastMove["swarm/1"] != 4 {
		t.Fatalf("seeded %+v", st)
	}
	// Plan cools swarm/1 for rounds 7 to 10 and lets it move at 11.
	b, c := placement.Node{ID: "b", Coord: at(0, 0)}, placement.Node{ID: "c", Coord: at(100, 0)}
	far := placement.Client{Node: "c", Coord: at(100, 0), Count: 1}
	sum, err := placement.Summarize(placement.Clients{Producers: []placement.Client{far}, Consumers: []placement.Client{far}}, &b)
	if err != nil {
		t.Fatal(err)
	}
	snap := placement.Snapshot{Nodes: []placement.Node{b, c}, Topics: []placement.Topic{{Name: "swarm/1", Home: "b", Threshold: 20 * time.Millisecond, Summary: sum}}}
	cfg := m.cfg.Planner
	cfg.Confirm = 1
	for round := uint64(7); round <= 11; round++ {
		res, next, err := placement.Plan(snap, cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		st = next
		if moved := len(res.Moves) == 1; moved != (round == 11) {
			t.Fatalf("round %d: moves %+v", round, res.Moves)
		}
	}
}

func TestReceiveRefuses(t *testing.T) {
	f := newWorld(t, 0, []string{"a"}, nil)
	m, err := New(Config{}, f)
	if err != nil {
		t.Fatal(err)
	}
	rep := monitor.Report{Node: "a", Incarnation: 5, Seq: 2, Window: time.Second}
	enc := func(r monitor.Report) []byte {
		b, err := monitor.AppendReport(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := m.Receive("a", enc(rep)); err != nil {
		t.Fatal(err)
	}
	older := rep
	older.Seq = 2
	restarted := rep
	restarted.Incarnation, restarted.Seq = 6, 1
	for _, tc := range []struct {
		name string
		from string
		body []byte
		ok   bool
	}{
		{"corrupt", "a", []byte{1, 2, 3}, false},
		{"names another node", "b", enc(rep), false},
		{"not newer", "a", enc(older), false},
		{"another incarnation", "a", enc(restarted), true},
		{"replayed", "a", enc(restarted), false},
	} {
		err := m.Receive(tc.from, tc.body)
		if ok := err == nil; ok != tc.ok || !ok && !errors.Is(err, ErrReport) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if got := m.Status().Refused; got != 4 {
		t.Errorf("refused %d, want 4", got)
	}
}

func TestPlannerConfig(t *testing.T) {
	pc, err := PlannerConfig("allpairs", 90, 5000, 3*time.Millisecond, 10, 2, 12*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := placement.Config{Policy: placement.AllPairs{}, Overload: 0.9, MaxOutRate: 5000, Margin: 3 * time.Millisecond,
		MarginRatio: 0.1, Confirm: 2, Cooldown: 3}
	if pc != want {
		t.Fatalf("%+v, want %+v", pc, want)
	}
	for name, err := range map[string]error{
		"policy":   func() error { _, err := PlannerConfig("oracle", 85, 0, 0, 5, 3, 0, time.Second); return err }(),
		"overload": func() error { _, err := PlannerConfig("center", 0, 0, 0, 5, 3, 0, time.Second); return err }(),
		"confirm":  func() error { _, err := PlannerConfig("center", 85, 0, 0, 5, 0, 0, time.Second); return err }(),
		"interval": func() error { _, err := PlannerConfig("center", 85, 0, 0, 5, 3, 0, 0); return err }(),
	} {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// The voters of a moved group keep its replica count: a leadership move
// keeps the set, one replica follows the home, three choose by spread
// among the current voters and the new home.
func TestDesiredVoters(t *testing.T) {
	f := &fakeMeta{}
	nodes := map[string][2]string{"a": {"s1", "z1"}, "b": {"s1", "z2"}, "c": {"s1", "z3"}, "d": {"s2", "z1"}, "e": {"s1", "z1"}}
	for id, l := range nodes {
		f.Propose(context.Background(), fsm.RegisterNode(fsm.Node{ID: id, Labels: fsm.Labels{Site: l[0], Zone: l[1], Tier: fsm.TierCore}, JoinedAt: t0}))
	}
	f.Propose(context.Background(), fsm.PutPolicies([]fsm.Rule{{Match: "r/#", Mode: fsm.Sequenced, Replicas: 3, Spread: fsm.SpreadZone}}))
	state := f.State()
	g3 := fsm.Group{ID: "r/1", Rule: "r/#", Home: "a", Voters: []string{"a", "b", "c"}, Epoch: 1}
	for _, tc := range []struct {
		g    fsm.Group
		to   string
		want []string
	}{
		{g3, "b", []string{"b", "a", "c"}},
		{fsm.Group{ID: "r/2", Rule: "r/#", Home: "a", Voters: []string{"a"}, Epoch: 1}, "d", []string{"d"}},
		// e is in s1/z1 like a: zone spread keeps b and c (other zones).
		{g3, "e", []string{"e", "b", "c"}},
	} {
		got := desiredVoters(state, tc.g, tc.to, nil)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s to %s: %v, want %v", tc.g.ID, tc.to, got, tc.want)
		}
	}
}

// Move records an operator's decision, which the manager's own do not
// replace.
func TestManualMove(t *testing.T) {
	f := newWorld(t, 20, []string{"a", "b", "c"}, map[string]string{"swarm/7/pos": "a"})
	s := newStepper(t, f, defaultPlanner(t))
	g, err := s.m.Move(context.Background(), "swarm/7/pos", "b")
	if err != nil || g.Desired == nil || g.Desired.Home != "b" || g.Desired.Reason != fsm.ReasonManual {
		t.Fatalf("move: %+v, %v", g.Desired, err)
	}
	if _, err := s.m.Move(context.Background(), "direct/topic", "b"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("a topic without a group: %v", err)
	}
	if _, err := s.m.Move(context.Background(), "swarm/7/pos", "ghost"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("an unknown node: %v", err)
	}
	// The clients are at c: the manager would move the group there, but
	// the operator's decision stands.
	ra := &reporter{node: "a", coord: at(0, 0)}
	rb := &reporter{node: "b", coord: at(50, 0)}
	rc := &reporter{node: "c", coord: at(100, 0)}
	for range 5 {
		ra.send(t, s.m)
		rb.send(t, s.m)
		rc.send(t, s.m, clients("swarm/7/pos", 1, 1, 1, 1))
		s.round()
	}
	if ds := f.decisions(); len(ds) != 1 || ds[0].Reason != fsm.ReasonManual {
		t.Fatalf("decisions %+v, want only the manual one", ds)
	}
	if st := s.m.Status(); st.Failed != 0 {
		t.Fatalf("%d refused proposals", st.Failed)
	}
	// Moving it to where it is cancels the decision.
	if g, err := s.m.Move(context.Background(), "swarm/7/pos", "a"); err != nil || g.Desired != nil {
		t.Fatalf("move back: %+v, %v", g, err)
	}
}

// The loop: a timer round every interval, an event round soon after a
// report that shows clients arriving, nothing while not leading, and
// events do not shorten a latency move's confirmation.
func TestRunRoundsOnTimerAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newWorld(t, 20, []string{"a", "b", "c"}, map[string]string{"swarm/7/pos": "a"})
		f.leader.Store(false)
		const interval = 5 * time.Second
		m, err := New(Config{Interval: interval, Planner: defaultPlanner(t)}, f)
		if err != nil {
			t.Fatal(err)
		}
		defer background(m.Run)()
		ra := &reporter{node: "a", coord: at(0, 0)}
		rb := &reporter{node: "b", coord: at(50, 0)}
		rc := &reporter{node: "c", coord: at(100, 0)}
		report := func(rtt float64) {
			ra.send(t, m)
			rb.send(t, m)
			rc.send(t, m, clients("swarm/7/pos", 2, 2, rtt, 5))
		}
		// Not the leader: rounds plan nothing.
		sleep(interval / 2)
		for range 4 {
			report(1)
			sleep(interval)
		}
		if st := m.Status(); st.Leading || len(f.decisions()) != 0 {
			t.Fatalf("not leading: status %+v, decisions %+v", st, f.decisions())
		}
		// Leading: the next timer round plans (a violation, confirmation
		// starts at 1).
		f.leader.Store(true)
		sleep(interval)
		synctest.Wait()
		first := m.Status()
		if !first.Leading || first.Event || len(f.decisions()) != 0 {
			t.Fatalf("first round as leader: %+v", first)
		}
		// Farther clients at c: an event round within EventGap, which
		// repeats the round number.
		start := time.Now()
		rc.send(t, m, clients("swarm/7/pos", 2, 2, 30, 5))
		sleep(m.cfg.EventGap + time.Millisecond)
		synctest.Wait()
		ev := m.Status()
		if !ev.Event || ev.Round != first.Round || ev.At.Sub(start) > m.cfg.EventGap {
			t.Fatalf("event round %+v after a round at %v", ev, first.At)
		}
		// Many events within the interval do not confirm the move.
		for i := 0; i < 3; i++ {
			rc.send(t, m, clients("swarm/7/pos", 2, 2, 40+10*float64(i), 5))
			sleep(m.cfg.EventGap + time.Millisecond)
		}
		if len(f.decisions()) != 0 {
			t.Fatalf("events confirmed a move: %+v", f.decisions())
		}
		// Two more timer rounds confirm it (rounds first+1, first+2).
		for range 2 {
			report(1)
			sleep(interval)
		}
		synctest.Wait()
		if ds := f.decisions(); len(ds) != 1 || ds[0].Home != "c" {
			t.Fatalf("decisions %+v, want swarm/7/pos -> c", ds)
		}
		// Leadership lost: the manager stops planning.
		f.leader.Store(false)
		sleep(interval)
		synctest.Wait()
		if m.Status().Leading {
			t.Fatal("still leading after leadership was lost")
		}
	})
}

func TestConfigRefusesNegatives(t *testing.T) {
	for _, cfg := range []Config{{Interval: -1}, {StaleAfter: -1}, {EventGap: -1}, {MaxDecisions: -1}} {
		if _, err := New(cfg, &fakeMeta{}); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	if _, err := New(Config{}, nil); !errors.Is(err, ErrConfig) {
		t.Error("no metadata accepted")
	}
}

// The node's placement settings (internal/config) make a planner
// configuration: every value its Validate accepts, PlannerConfig accepts.
func TestNodeSettingsMakeAPlanner(t *testing.T) {
	c := config.Default()
	for _, policy := range []string{"center", "centroid", "allpairs", "hash", "publisher"} {
		c.PlacementPolicy = policy
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		pc, err := PlannerConfig(c.PlacementPolicy, c.PlacementOverload, c.PlacementMaxOut, c.PlacementMargin,
			c.PlacementMarginPc, c.PlacementConfirm, c.PlacementCooldown, c.PlacementInterval)
		if err != nil {
			t.Fatalf("%s: %v", policy, err)
		}
		if pc.Overload != 0.85 || pc.Confirm != 3 || pc.Cooldown != 6 || pc.MarginRatio != 0.05 {
			t.Fatalf("%s: %+v", policy, pc)
		}
	}
}

// A node keeps reporting the load of a group decided away from it until
// the group has moved and a report covers only time after that: the
// manager must not shed again on that load. Here shedding the busiest
// group relieves a; its next reports, still at 95%, shed nothing more;
// once the move is done and a report covering only later time still shows
// a overloaded, it sheds the next group. (A move the manager did not see
// pending, done between two rounds, counts from the round that sees it.)
func TestPendingShedIsNotShedAgain(t *testing.T) {
	f := newWorld(t, 0, []string{"a", "b", "c"}, map[string]string{"swarm/big": "a", "swarm/mid": "a"})
	s := newStepper(t, f, defaultPlanner(t))
	ra := &reporter{node: "a", coord: at(0, 0), load: monitor.Load{CPU: 0.95, MsgIn: 500, MsgOut: 500}}
	rb := &reporter{node: "b", coord: at(10, 0), load: monitor.Load{CPU: 0.05, MsgIn: 10, MsgOut: 10}}
	rc := &reporter{node: "c", coord: at(20, 0), load: monitor.Load{CPU: 0.05, MsgIn: 10, MsgOut: 10}}
	send := func() {
		ra.send(t, s.m, clients("swarm/big", 1, 1, 1, 300), clients("swarm/mid", 1, 1, 1, 200))
		rb.send(t, s.m)
		rc.send(t, s.m)
	}
	send()
	s.round()
	if ds := f.decisions(); len(ds) != 1 || ds[0].Group != "swarm/big" || ds[0].Reason != fsm.ReasonOverload {
		t.Fatalf("decisions %+v, want swarm/big shed", ds)
	}
	for round := 2; round <= 4; round++ {
		send()
		st := s.round()
		if n := len(f.decisions()); n != 1 {
			t.Fatalf("round %d: %d decisions on the load already decided away: %+v", round, n, f.decisions())
		}
		if slices.Contains(st.Overloaded, "a") {
			t.Fatalf("round %d: a overloaded while its shed is pending", round)
		}
	}
	// The executor moves swarm/big; a's reports after that still show it
	// overloaded: that load is real, and the next group goes.
	g, _ := f.State().Group("swarm/big")
	d := g.Desired
	for _, cmd := range []fsm.Command{
		fsm.SetGroupMembers(fsm.MembersChange{Group: g.ID, Epoch: g.Epoch, Voters: append(slices.Clone(g.Voters), d.Home)}),
		fsm.SetGroupHome(fsm.HomeChange{Group: g.ID, Home: d.Home, Epoch: g.Epoch + 1, Reason: fsm.ReasonMigration, At: t0}),
		fsm.SetGroupMembers(fsm.MembersChange{Group: g.ID, Epoch: g.Epoch + 1, Voters: d.Voters}),
	} {
		if _, err := f.Propose(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	if g, _ := f.State().Group("swarm/big"); g.Desired != nil || g.Home != d.Home {
		t.Fatalf("the move did not complete: %+v", g)
	}
	// The round that sees the move still takes a's report (of before it)
	// as capped; a report covering only time after that round is a's
	// real load.
	send()
	if st := s.round(); len(f.decisions()) != 1 || slices.Contains(st.Overloaded, "a") {
		t.Fatalf("the round that saw the move: overloaded %v, decisions %+v", st.Overloaded, f.decisions())
	}
	s.clk.Advance(6 * time.Second)
	send()
	st := s.round()
	if ds := f.decisions(); len(ds) != 2 || ds[1].Group != "swarm/mid" || !slices.Contains(st.Overloaded, "a") {
		t.Fatalf("after the move: overloaded %v, decisions %+v; want swarm/mid shed", st.Overloaded, ds)
	}
}
