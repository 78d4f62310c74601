package fsm

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0: a fixed default)")

func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	return seed
}

func group(id, home string, voters ...string) Group {
	return Group{ID: id, Rule: "g/#", Home: home, Voters: voters, Created: t0, Retention: Retention{Messages: 100}}
}

func TestGroupCommands(t *testing.T) {
	later := t0.Add(time.Hour)
	runApplyCases(t, []applyCase{
		{name: "register n1", cmd: RegisterNode(node("n1", TierCore))},
		{name: "register n2", cmd: RegisterNode(node("n2", TierCore))},
		{name: "register n3", cmd: RegisterNode(node("n3", TierEdge))},
		{name: "create", cmd: CreateGroup(group("g/1", "n1", "n1", "n2", "n3")), check: func(t *testing.T, s State, r Result) {
			g, ok := s.Group("g/1")
			if !ok || g.Epoch != 1 || g.HomeReason != ReasonCreated || !g.HomeSince.Equal(t0) || g.Home != "n1" {
				t.Errorf("record %+v", g)
			}
			if r.Group == nil || r.Group.Epoch != 1 || r.Group.ID != "g/1" {
				t.Errorf("result group %+v", r.Group)
			}
		}},
		{name: "create again conflicts and returns the record", cmd: CreateGroup(group("g/1", "n2", "n2")), code: CodeConflict, field: "group.id",
			check: func(t *testing.T, s State, r Result) {
				if r.Group == nil || r.Group.Home != "n1" || len(r.Group.Voters) != 3 {
					t.Errorf("conflict returned %+v, want the existing record", r.Group)
				}
			}},
		{name: "create on an unknown node", cmd: CreateGroup(group("g/2", "n1", "n1", "ghost")), code: CodeNotFound, field: "group.voters[1]"},
		{name: "create with home outside voters", cmd: CreateGroup(group("g/2", "n1", "n2")), code: CodeInvalid, field: "group.home"},
		{name: "create with repeated voter", cmd: CreateGroup(group("g/2", "n1", "n1", "n1")), code: CodeInvalid, field: "group.voters[1]"},
		{name: "create with voter as learner", cmd: CreateGroup(func() Group { g := group("g/2", "n1", "n1"); g.Learners = []string{"n1"}; return g }()),
			code: CodeInvalid, field: "group.learners[0]"},
		{name: "create with epoch", cmd: CreateGroup(func() Group { g := group("g/2", "n1", "n1"); g.Epoch = 3; return g }()), code: CodeInvalid, field: "group.epoch"},
		{name: "create without time", cmd: CreateGroup(func() Group { g := group("g/2", "n1", "n1"); g.Created = time.Time{}; return g }()), code: CodeInvalid, field: "group.created"},
		{name: "create with bad rule", cmd: CreateGroup(func() Group { g := group("g/2", "n1", "n1"); g.Rule = "a/#/b"; return g }()), code: CodeInvalid, field: "group.rule"},
		{name: "create with bad id", cmd: CreateGroup(group("g\x01", "n1", "n1")), code: CodeInvalid, field: "group.id"},
		{name: "create with negative retention", cmd: CreateGroup(func() Group { g := group("g/2", "n1", "n1"); g.Retention.Messages = -1; return g }()),
			code: CodeInvalid, field: "group.retention.messages"},
		{name: "set home with stale epoch", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 3, Reason: ReasonFailover, At: later}),
			code: CodeConflict, field: "home.epoch", check: func(t *testing.T, s State, r Result) {
				if r.Group == nil || r.Group.Epoch != 1 {
					t.Errorf("conflict returned %+v, want the current record", r.Group)
				}
			}},
		{name: "set home to a non-voter", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n9", Epoch: 2, Reason: ReasonManual, At: later}), code: CodeConflict, field: "home.home"},
		{name: "set home of an unknown group", cmd: SetGroupHome(HomeChange{Group: "g/9", Home: "n2", Epoch: 2, Reason: ReasonManual, At: later}), code: CodeNotFound, field: "home.group"},
		{name: "set home with a bad reason", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 2, Reason: "whim", At: later}), code: CodeInvalid, field: "home.reason"},
		{name: "set home with reason created", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 2, Reason: ReasonCreated, At: later}), code: CodeInvalid, field: "home.reason"},
		{name: "set home", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 2, Reason: ReasonFailover, At: later}), check: func(t *testing.T, s State, r Result) {
			g, _ := s.Group("g/1")
			if g.Home != "n2" || g.Epoch != 2 || g.HomeReason != ReasonFailover || !g.HomeSince.Equal(later) || !g.Created.Equal(t0) {
				t.Errorf("record %+v", g)
			}
		}},
		{name: "set home replayed conflicts", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 2, Reason: ReasonFailover, At: later}), code: CodeConflict, field: "home.epoch"},
		{name: "set members with old epoch", cmd: SetGroupMembers(MembersChange{Group: "g/1", Epoch: 1, Voters: []string{"n2", "n3"}}), code: CodeConflict, field: "members.epoch"},
		{name: "set members dropping the home", cmd: SetGroupMembers(MembersChange{Group: "g/1", Epoch: 2, Voters: []string{"n1", "n3"}}), code: CodeConflict, field: "members.voters"},
		{name: "set members with an unknown learner", cmd: SetGroupMembers(MembersChange{Group: "g/1", Epoch: 2, Voters: []string{"n2"}, Learners: []string{"ghost"}}),
			code: CodeNotFound, field: "members.learners[0]"},
		{name: "set members", cmd: SetGroupMembers(MembersChange{Group: "g/1", Epoch: 2, Voters: []string{"n2", "n3"}, Learners: []string{"n1"}}),
			check: func(t *testing.T, s State, r Result) {
				g, _ := s.Group("g/1")
				if !slices.Equal(g.Voters, []string{"n2", "n3"}) || !slices.Equal(g.Learners, []string{"n1"}) || g.Epoch != 2 {
					t.Errorf("record %+v", g)
				}
			}},
		{name: "handover to an unknown node", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "ghost", Epoch: 3, Reason: ReasonManual, At: later, Handover: []string{"ghost"}}),
			code: CodeNotFound, field: "home.handover.voters[0]"},
		{name: "handover without the home", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n1", Epoch: 3, Reason: ReasonManual, At: later, Handover: []string{"n3"}}),
			code: CodeInvalid, field: "home.handover"},
		{name: "handover with a stale epoch", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n1", Epoch: 2, Reason: ReasonManual, At: later, Handover: []string{"n1"}}),
			code: CodeConflict, field: "home.epoch"},
		{name: "handover to a non-voter replaces the voters", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n1", Epoch: 3, Reason: ReasonManual, At: later, Handover: []string{"n1"}}),
			check: func(t *testing.T, s State, r Result) {
				g, _ := s.Group("g/1")
				if g.Home != "n1" || g.Epoch != 3 || !slices.Equal(g.Voters, []string{"n1"}) || g.Learners != nil || g.HomeReason != ReasonManual {
					t.Errorf("record %+v", g)
				}
			}},
		{name: "the same home again only advances the epoch", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n1", Epoch: 4, Reason: ReasonMigration, At: later.Add(time.Hour)}),
			check: func(t *testing.T, s State, r Result) {
				g, _ := s.Group("g/1")
				if g.Home != "n1" || g.Epoch != 4 || g.HomeReason != ReasonManual || !g.HomeSince.Equal(later) {
					t.Errorf("record %+v, want epoch 4 with the home's reason and since unchanged", g)
				}
			}},
		{name: "a handover at the epoch taken conflicts", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 4, Reason: ReasonManual, At: later, Handover: []string{"n2"}}),
			code: CodeConflict, field: "home.epoch"},
		{name: "a handover from another node than the home conflicts", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 5, Reason: ReasonManual, At: later, Handover: []string{"n2"}, HandoverFrom: "n3"}),
			code: CodeConflict, field: "home.handover_from"},
		{name: "handover_from without handover", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 5, Reason: ReasonManual, At: later, HandoverFrom: "n1"}),
			code: CodeInvalid, field: "home.handover_from"},
		{name: "a handover from the home records it", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 5, Reason: ReasonManual, At: later, Handover: []string{"n2"}, HandoverFrom: "n1"}),
			check: func(t *testing.T, s State, r Result) {
				g, _ := s.Group("g/1")
				if g.Home != "n2" || g.Epoch != 5 || !slices.Equal(g.Voters, []string{"n2"}) || g.HandoverFrom != "n1" {
					t.Errorf("record %+v, want n2 home at epoch 5, handed over from n1", g)
				}
			}},
		{name: "the next home change clears handover_from", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "n2", Epoch: 6, Reason: ReasonManual, At: later}),
			check: func(t *testing.T, s State, r Result) {
				g, _ := s.Group("g/1")
				if g.Epoch != 6 || g.HandoverFrom != "" {
					t.Errorf("record %+v, want epoch 6 with no handover_from", g)
				}
			}},
		{name: "delete unknown", cmd: DeleteGroup("g/9"), code: CodeNotFound, field: "group_id"},
		{name: "delete", cmd: DeleteGroup("g/1"), check: func(t *testing.T, s State, r Result) {
			if _, ok := s.Group("g/1"); ok || s.GroupCount() != 0 {
				t.Errorf("group still there")
			}
		}},
		{name: "group command with a foreign field", cmd: Command{Op: OpDeleteGroup, GroupID: "g/1", NodeID: "n1"}, code: CodeInvalid},
		{name: "create without group", cmd: Command{Op: OpCreateGroup}, code: CodeInvalid},
	})
}

func TestGroupRecordsAreCopies(t *testing.T) {
	s := applyAll(t, RegisterNode(node("n1", TierCore)), RegisterNode(node("n2", TierCore)), CreateGroup(group("g", "n1", "n1", "n2")))
	g, _ := s.Group("g")
	g.Voters[0] = "mutated"
	for _, got := range [][]Group{{mustGroup(t, s, "g")}, s.Groups(), s.GroupsByHome("n1")} {
		if got[0].Voters[0] != "n1" {
			t.Fatalf("a caller's change reached the state: %+v", got[0])
		}
	}
}

func mustGroup(t *testing.T, s State, id string) Group {
	t.Helper()
	g, ok := s.Group(id)
	if !ok {
		t.Fatalf("no group %q", id)
	}
	return g
}

func TestGroupQueries(t *testing.T) {
	cmds := []Command{RegisterNode(node("a", TierCore)), RegisterNode(node("b", TierCore)), RegisterNode(node("c", TierEdge))}
	cmds = append(cmds,
		CreateGroup(group("g1", "a", "a", "b", "c")),
		CreateGroup(group("g2", "a", "a")),
		CreateGroup(func() Group { g := group("g3", "b", "b", "a", "c"); g.Learners = []string{}; return g }()),
		CreateGroup(func() Group { g := group("g4", "c", "c"); g.Learners = []string{"b"}; return g }()),
	)
	s := applyAll(t, cmds...)
	if got := ids(s.GroupsByHome("a")); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Errorf("groups homed on a: %v", got)
	}
	if got := ids(s.GroupsByHome("z")); len(got) != 0 {
		t.Errorf("groups homed on z: %v", got)
	}
	want := map[string]GroupLoad{"a": {Homes: 2, Replicas: 3}, "b": {Homes: 1, Replicas: 3}, "c": {Homes: 1, Replicas: 3}}
	if got := s.GroupLoad(); !maps.Equal(got, want) {
		t.Errorf("load %v, want %v", got, want)
	}
	if got := ids(s.Groups()); !slices.Equal(got, []string{"g1", "g2", "g3", "g4"}) || s.GroupCount() != 4 {
		t.Errorf("groups %v (%d)", got, s.GroupCount())
	}
	if g := mustGroup(t, s, "g3"); g.Learners != nil {
		t.Errorf("empty learners not normalised: %#v", g.Learners)
	}
}

func ids(gs []Group) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.ID)
	}
	return out
}

// TestGroupTableAgainstMap checks the sharded persistent table against a
// plain map, and that older versions never change.
func TestGroupTableAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 7))
	var tab groupTable
	model := map[string]Group{}
	type version struct {
		tab   groupTable
		model map[string]Group
	}
	var versions []version
	for step := range 3000 {
		id := fmt.Sprintf("g%d", r.IntN(400))
		if r.IntN(3) == 0 {
			tab = tab.without(id)
			delete(model, id)
		} else {
			g := group(id, "n1", "n1")
			g.Epoch = uint64(step)
			tab = tab.with(g)
			model[id] = g
		}
		if step%100 == 0 {
			versions = append(versions, version{tab, maps.Clone(model)})
		}
	}
	versions = append(versions, version{tab, model})
	for i, v := range versions {
		if v.tab.n != len(v.model) {
			t.Fatalf("version %d: %d groups, model %d", i, v.tab.n, len(v.model))
		}
		all := v.tab.all()
		if len(all) != len(v.model) || !slices.IsSortedFunc(all, func(a, b Group) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatalf("version %d: all() returned %d unsorted or wrong", i, len(all))
		}
		for _, g := range all {
			if m, ok := v.model[g.ID]; !ok || m.Epoch != g.Epoch {
				t.Fatalf("version %d: %s epoch %d, model %+v", i, g.ID, g.Epoch, m)
			}
		}
	}
	if built := newGroupTable(slices.Collect(maps.Values(model))); !slices.EqualFunc(built.all(), tab.all(), func(a, b Group) bool { return a.ID == b.ID && a.Epoch == b.Epoch }) {
		t.Fatal("newGroupTable differs from the table built by with")
	}
}

func TestGroupForTopic(t *testing.T) {
	long := strings.Repeat("x", 300)
	s := applyAll(t, PutPolicies([]Rule{
		{Match: "swarm/+/+/#", Mode: Sequenced, Group: "swarm/{1}"},
		{Match: "chat/#", Mode: Direct},
		{Match: "long/+", Mode: Sequenced, Group: "l/{1}"},
		{Match: "seq/#", Mode: Sequenced, Replicas: 3},
	}))
	tests := []struct {
		topic, want string
		ok          bool
	}{
		{"swarm/7/a/b", "swarm/7", true},
		{"swarm/7/b", "swarm/7", true},
		{"swarm//x", "swarm/", true},
		{"chat/room", "", false},
		{"other", "", false}, // the default rule is direct
		{"seq/a/b", "seq/a/b", true},
		{"seq/\x01", "", true}, // checked below: hashed
		{"long/" + long, "", true},
	}
	for _, tc := range tests {
		id, r, ok := s.GroupFor(tc.topic)
		if ok != tc.ok {
			t.Errorf("%q: sequenced %v, want %v (rule %q)", tc.topic, ok, tc.ok, r.Match)
			continue
		}
		if tc.want != "" && id != tc.want {
			t.Errorf("%q: group %q, want %q", tc.topic, id, tc.want)
		}
		if ok && !validGroupID(id) {
			t.Errorf("%q: group %q is not a valid id", tc.topic, id)
		}
	}
	id, _, _ := s.GroupFor("seq/\x01")
	if !strings.HasPrefix(id, "seq/~") || len(id) != len("seq/~")+16 || strings.Trim(id[len("seq/~"):], "0123456789abcdef") != "" {
		t.Errorf("control character: %q", id)
	}
	id, _, _ = s.GroupFor("long/" + long)
	if len(id) != 200+1+16 || !strings.HasPrefix(id, "l/xxx") {
		t.Errorf("long expansion: %q (%d bytes)", id, len(id))
	}
	other, _, _ := s.GroupFor("long/" + long + "y")
	if other == id {
		t.Errorf("two long topics share the id %q", id)
	}
	if got := groupIDOf(""); !strings.HasPrefix(got, "~") || !validGroupID(got) {
		t.Errorf("empty expansion: %q", got)
	}
	if got := groupIDOf(strings.Repeat("é", 150)); !validGroupID(got) {
		t.Errorf("multi-byte cut: %q", got)
	}
}

func labelled(id, site, zone, tier string) Node {
	return Node{ID: id, JoinedAt: t0, Labels: Labels{Site: site, Zone: zone, Tier: tier}}
}

func TestChooseVoters(t *testing.T) {
	// Sites ams (zones a, b, c) and fra (zones a, b), lon (one zone).
	nodes := []Node{
		labelled("ams-a1", "ams", "a", TierCore), labelled("ams-a2", "ams", "a", TierCore),
		labelled("ams-b1", "ams", "b", TierCore), labelled("ams-b2", "ams", "b", TierEdge),
		labelled("ams-c1", "ams", "c", TierEdge),
		labelled("fra-a1", "fra", "a", TierCore), labelled("fra-b1", "fra", "b", TierCore),
		labelled("lon-a1", "lon", "a", TierCore),
	}
	// Distances: same site 1, ams-fra 10, ams-lon 15, fra-lon 12; ams-c1 is
	// a little further than its site's others.
	dist := func(a, b string) float64 {
		if a == b {
			return 0
		}
		sa, sb := a[:3], b[:3]
		d := map[string]float64{"amsams": 1, "frafra": 1, "lonlon": 1, "amsfra": 10, "fraams": 10, "amslon": 15, "lonams": 15, "fralon": 12, "lonfra": 12}[sa+sb]
		if a == "ams-c1" || b == "ams-c1" {
			d += 0.5
		}
		return d
	}
	tests := []struct {
		name     string
		home     string
		nodes    []Node
		replicas int
		spread   Spread
		dist     Distance
		want     []string
		err      error
	}{
		{name: "one replica", home: "ams-a1", nodes: nodes, replicas: 1, want: []string{"ams-a1"}},
		{name: "zone: other zones of the site", home: "ams-a1", nodes: nodes, replicas: 3, spread: SpreadZone, dist: dist,
			want: []string{"ams-a1", "ams-b1", "ams-c1"}},
		{name: "zone: core breaks a distance tie", home: "ams-c1", nodes: nodes, replicas: 3, spread: SpreadZone, dist: dist,
			want: []string{"ams-c1", "ams-a1", "ams-b1"}},
		{name: "zone: then used zones of the site, then the nearest site", home: "ams-a1", nodes: nodes, replicas: 5, spread: SpreadZone, dist: dist,
			want: []string{"ams-a1", "ams-b1", "ams-c1", "ams-a2", "ams-b2"}},
		{name: "zone: site too small falls back to the nearest site", home: "fra-a1", nodes: nodes, replicas: 5, spread: SpreadZone, dist: dist,
			want: []string{"fra-a1", "fra-b1", "ams-a1", "ams-b1", "ams-c1"}},
		{name: "zone: other sites by new (site, zone) first", home: "lon-a1", nodes: nodes, replicas: 5, spread: SpreadZone, dist: dist,
			want: []string{"lon-a1", "fra-a1", "fra-b1", "ams-a1", "ams-b1"}},
		{name: "site: one per site, nearest", home: "ams-a1", nodes: nodes, replicas: 3, spread: SpreadSite, dist: dist,
			want: []string{"ams-a1", "fra-a1", "lon-a1"}},
		{name: "site: then new zones of used sites", home: "ams-a1", nodes: nodes, replicas: 5, spread: SpreadSite, dist: dist,
			want: []string{"ams-a1", "fra-a1", "lon-a1", "ams-b1", "ams-c1"}},
		{name: "no distances: core, then id", home: "ams-a1", nodes: nodes, replicas: 3, spread: SpreadSite,
			want: []string{"ams-a1", "fra-a1", "lon-a1"}},
		{name: "unlabelled nodes share one site", home: "x", nodes: []Node{labelled("x", "", "", TierEdge), labelled("y", "", "", TierEdge), labelled("z", "", "", TierCore)},
			replicas: 3, spread: SpreadSite, want: []string{"x", "z", "y"}},
		{name: "NaN distance ranks last", home: "ams-a1", nodes: nodes, replicas: 3, spread: SpreadZone,
			dist: func(a, b string) float64 {
				if b == "ams-b1" {
					return nan()
				}
				return dist(a, b)
			}, want: []string{"ams-a1", "ams-b2", "ams-c1"}},
		{name: "too few", home: "ams-a1", nodes: nodes[:2], replicas: 3, spread: SpreadZone, err: ErrTooFewNodes},
		{name: "home not alive", home: "gone", nodes: nodes, replicas: 3, spread: SpreadZone, err: ErrInvalid},
		{name: "bad replicas", home: "ams-a1", nodes: nodes, replicas: 2, spread: SpreadZone, err: ErrInvalid},
		{name: "bad spread", home: "ams-a1", nodes: nodes, replicas: 3, spread: "rack", err: ErrInvalid},
		{name: "duplicate node", home: "ams-a1", nodes: append(slices.Clone(nodes), nodes[3]), replicas: 3, spread: SpreadZone, err: ErrInvalid},
	}
	for _, tc := range tests {
		got, err := ChooseVoters(tc.home, tc.nodes, tc.replicas, tc.spread, tc.dist)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func nan() float64 { var z float64; return z / z }

// TestChooseVotersIgnoresInputOrder: shuffled inputs give the same voters,
// always distinct, the home first.
func TestChooseVotersIgnoresInputOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 11))
	for round := range 200 {
		var nodes []Node
		for i := range 3 + r.IntN(10) {
			tier := TierCore
			if r.IntN(2) == 0 {
				tier = TierEdge
			}
			nodes = append(nodes, labelled(fmt.Sprintf("n%02d", i), fmt.Sprint("s", r.IntN(3)), fmt.Sprint("z", r.IntN(3)), tier))
		}
		coord := map[string]float64{}
		for _, n := range nodes {
			coord[n.ID] = float64(r.IntN(5))
		}
		dist := func(a, b string) float64 { return max(coord[a]-coord[b], coord[b]-coord[a]) }
		home := nodes[r.IntN(len(nodes))].ID
		replicas := []int{1, 3, 5}[r.IntN(3)]
		spread := []Spread{SpreadZone, SpreadSite}[r.IntN(2)]
		want, err := ChooseVoters(home, nodes, replicas, spread, dist)
		if len(nodes) < replicas {
			if !errors.Is(err, ErrTooFewNodes) {
				t.Fatalf("round %d: %v", round, err)
			}
			continue
		}
		if err != nil || len(want) != replicas || want[0] != home || len(slices.Compact(slices.Sorted(slices.Values(want)))) != replicas {
			t.Fatalf("round %d: %v, %v", round, want, err)
		}
		r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		if got, _ := ChooseVoters(home, nodes, replicas, spread, dist); !slices.Equal(got, want) {
			t.Fatalf("round %d: shuffled input gave %v, first %v", round, got, want)
		}
	}
}
