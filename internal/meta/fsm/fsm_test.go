package fsm

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func node(id, tier string) Node {
	return Node{ID: id, JoinedAt: t0, Labels: Labels{
		Site: "ams", Zone: "z1", Tier: tier,
		MQTTAddr: "10.0.0.1:1883", AdminAddr: "10.0.0.1:8088", PeerAddr: "10.0.0.1:7950",
	}}
}

func ptr[T any](v T) *T { return &v }

// applyAll applies cmds at indexes 1, 2, ... and fails on any rejection.
func applyAll(t *testing.T, cmds ...Command) State {
	t.Helper()
	var s State
	for i, c := range cmds {
		var res Result
		s, res = s.Apply(uint64(i+1), c)
		if err := res.Err(); err != nil {
			t.Fatalf("command %d (%s): %v", i, c.Op, err)
		}
	}
	return s
}

func TestApply(t *testing.T) {
	rules := []Rule{
		{Match: "swarm/+/telemetry", Mode: Sequenced, LatencyMS: 40, Replicas: 3, Spread: SpreadSite, Group: "swarm/{1}",
			Retention: &Retention{Messages: 10000, Duration: Duration(24 * time.Hour)}},
		{Match: "sensors/#", Mode: Sequenced},
		{Match: "chat/+", Mode: Direct, LatencyMS: 100},
	}
	later := t0.Add(time.Hour)
	moved := node("n1", TierCore)
	moved.Labels.Zone = "z2"
	moved.JoinedAt = later

	runApplyCases(t, []applyCase{
		{name: "register", cmd: RegisterNode(node("n1", TierCore)), check: func(t *testing.T, s State, r Result) {
			if n, ok := s.Node("n1"); !ok || n.Labels.Tier != TierCore || !n.JoinedAt.Equal(t0) {
				t.Errorf("node %+v %v", n, ok)
			}
		}},
		{name: "register second", cmd: RegisterNode(node("n2", TierEdge))},
		{name: "re-register keeps joined_at", cmd: RegisterNode(moved), check: func(t *testing.T, s State, r Result) {
			n, _ := s.Node("n1")
			if n.Labels.Zone != "z2" || !n.JoinedAt.Equal(t0) {
				t.Errorf("node %+v", n)
			}
		}},
		{name: "bad tier", cmd: RegisterNode(node("n3", "middle")), code: CodeInvalid, field: "node.labels.tier"},
		{name: "bad id", cmd: RegisterNode(node("n 3", TierEdge)), code: CodeInvalid, field: "node.id"},
		{name: "put policies", cmd: PutPolicies(rules), check: func(t *testing.T, s State, r Result) {
			if r.PoliciesVersion != 1 || s.Policies().Version != 1 || len(s.Policies().Rules) != 3 {
				t.Errorf("result %+v policies %+v", r, s.Policies())
			}
			if got := s.RuleFor("sensors/a/b"); got.Replicas != 1 || got.Mode != Sequenced {
				t.Errorf("sequenced rule not normalised to 1 replica: %+v", got)
			}
		}},
		{name: "cas stale", cmd: PutPoliciesIf(nil, 0), code: CodeConflict, field: "expect_version"},
		{name: "cas fresh", cmd: PutPoliciesIf(rules[:1], 1), check: func(t *testing.T, s State, r Result) {
			if r.PoliciesVersion != 2 || len(s.Policies().Rules) != 1 {
				t.Errorf("result %+v policies %+v", r, s.Policies())
			}
		}},
		{name: "invalid rule keeps version", cmd: PutPolicies([]Rule{{Match: "a/#/b", Mode: Direct}}), code: CodeInvalid, field: "rules[0].match",
			check: func(t *testing.T, s State, r Result) {
				if s.Policies().Version != 2 {
					t.Errorf("version moved to %d on a rejected command", s.Policies().Version)
				}
			}},
		{name: "remove", cmd: RemoveNode("n2"), check: func(t *testing.T, s State, r Result) {
			if _, ok := s.Node("n2"); ok || len(s.Nodes()) != 1 {
				t.Errorf("nodes %+v", s.Nodes())
			}
		}},
		{name: "remove unknown", cmd: RemoveNode("n2"), code: CodeNotFound, field: "node_id"},
		{name: "unknown op", cmd: Command{Op: "frobnicate"}, code: CodeInvalid, field: "op"},
		{name: "mixed fields", cmd: Command{Op: OpRemoveNode, NodeID: "n1", Rules: rules}, code: CodeInvalid},
	})
}

// applyCase is one command of a table test, applied at its position in the
// table (from index 1) to the state the cases before it left.
type applyCase struct {
	name  string
	cmd   Command
	code  Code   // "" for success
	field string // expected Error.Field
	check func(t *testing.T, s State, r Result)
}

// runApplyCases applies the cases in order and checks each one's outcome,
// that Apply never changes the state it is called on, and that a refused
// command changes nothing but the applied index.
func runApplyCases(t *testing.T, cases []applyCase) {
	t.Helper()
	var s State
	for i, tc := range cases {
		before := s.Snapshot()
		next, res := s.Apply(uint64(i+1), tc.cmd)
		if !bytes.Equal(s.Snapshot(), before) {
			t.Fatalf("%s: Apply modified the state it was called on", tc.name)
		}
		if next.Applied() != uint64(i+1) || res.Index != uint64(i+1) {
			t.Errorf("%s: applied %d, result index %d, want %d", tc.name, next.Applied(), res.Index, i+1)
		}
		switch {
		case tc.code == "" && res.Error != nil:
			t.Errorf("%s: rejected: %v", tc.name, res.Error)
		case tc.code != "" && res.Error == nil:
			t.Errorf("%s: accepted, want %s", tc.name, tc.code)
		case tc.code != "" && (res.Error.Code != tc.code || tc.field != "" && res.Error.Field != tc.field):
			t.Errorf("%s: error %+v, want code %s field %q", tc.name, res.Error, tc.code, tc.field)
		}
		if tc.code != "" && !bytes.Equal(next.Snapshot(), withApplied(t, before, uint64(i+1))) {
			t.Errorf("%s: a refused command changed the state", tc.name)
		}
		if tc.check != nil {
			tc.check(t, next, res)
		}
		s = next
	}
}

// withApplied is snapshot b with its applied index set to index.
func withApplied(t *testing.T, b []byte, index uint64) []byte {
	t.Helper()
	s, err := Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	s.applied = index
	return s.Snapshot()
}

func TestErrorsAreTyped(t *testing.T) {
	_, res := State{}.Apply(1, RemoveNode("ghost"))
	if !errors.Is(res.Err(), ErrNotFound) {
		t.Errorf("%v is not ErrNotFound", res.Err())
	}
	_, err := DecodeCommand([]byte(`{"v":1,"op":"put_policies","rules":[{"match":"a","mode":"sequenced","replicas":2}]}`))
	var fe *Error
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != "rules[0].replicas" {
		t.Errorf("got %v, want an invalid error on rules[0].replicas", err)
	}
	if want := "fsm: invalid: rules[0].replicas: must be 1, 3 or 5, not 2"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if (Result{}).Err() != nil {
		t.Error("a result without error returned a non-nil error")
	}
}

func TestRuleValidation(t *testing.T) {
	ok := []Rule{
		{Match: "#", Mode: Direct},
		{Match: "+", Mode: Sequenced, Replicas: 5, Spread: SpreadZone},
		{Match: "a/+/b/+/#", Mode: Sequenced, Group: "g/{2}/{1}"},
		{Match: "$SYS/x", Mode: Direct, LatencyMS: 1},
		{Match: "a", Mode: Sequenced, Retention: &Retention{Duration: Duration(time.Minute)}},
		{Match: "b", Mode: Direct, Replicas: 1},
	}
	if err := validateRules(ok); err != nil {
		t.Fatalf("valid rules rejected: %v", err)
	}
	bad := []struct {
		rule  Rule
		field string
	}{
		{Rule{Match: "", Mode: Direct}, "match"},
		{Rule{Match: "a/b#", Mode: Direct}, "match"},
		{Rule{Match: "a+/b", Mode: Direct}, "match"},
		{Rule{Match: "a\x00", Mode: Direct}, "match"},
		{Rule{Match: "\xff", Mode: Direct}, "match"},
		{Rule{Match: "$share/g/a", Mode: Direct}, "match"},
		{Rule{Match: "a", Mode: ""}, "mode"},
		{Rule{Match: "a", Mode: "fast"}, "mode"},
		{Rule{Match: "a", Mode: Direct, LatencyMS: -1}, "latency_ms"},
		{Rule{Match: "a", Mode: Direct, LatencyMS: MaxLatencyMS + 1}, "latency_ms"},
		{Rule{Match: "a", Mode: Direct, Replicas: 3}, "replicas"},
		{Rule{Match: "a", Mode: Direct, Group: "g"}, "group"},
		{Rule{Match: "a", Mode: Direct, Retention: &Retention{Messages: 1}}, "retention"},
		{Rule{Match: "a", Mode: Sequenced, Replicas: 4}, "replicas"},
		{Rule{Match: "a", Mode: Sequenced, Replicas: 7}, "replicas"},
		{Rule{Match: "a", Mode: Sequenced, Replicas: -1}, "replicas"},
		{Rule{Match: "a", Mode: Sequenced, Replicas: 1, Spread: SpreadSite}, "spread"},
		{Rule{Match: "a", Mode: Sequenced, Replicas: 3, Spread: "rack"}, "spread"},
		{Rule{Match: "a/+", Mode: Sequenced, Group: "g/{2}"}, "group"},
		{Rule{Match: "a/+", Mode: Sequenced, Group: "g/{0}"}, "group"},
		{Rule{Match: "a/+", Mode: Sequenced, Group: "g/{01}"}, "group"},
		{Rule{Match: "a/+", Mode: Sequenced, Group: "g/{1"}, "group"},
		{Rule{Match: "a/+", Mode: Sequenced, Group: "g/1}"}, "group"},
		{Rule{Match: "a/+", Mode: Sequenced, Group: "g/+"}, "group"},
		{Rule{Match: "a", Mode: Sequenced, Retention: &Retention{}}, "retention"},
		{Rule{Match: "a", Mode: Sequenced, Retention: &Retention{Messages: -1}}, "retention.messages"},
		{Rule{Match: "a", Mode: Sequenced, Retention: &Retention{Duration: -1}}, "retention.duration"},
	}
	for _, tc := range bad {
		err := validateRules([]Rule{{Match: "first", Mode: Direct}, tc.rule})
		if err == nil {
			t.Errorf("%+v accepted", tc.rule)
			continue
		}
		if want := "rules[1]." + tc.field; err.Field != want {
			t.Errorf("%+v: field %q, want %q (%v)", tc.rule, err.Field, want, err)
		}
	}
	if err := validateRules([]Rule{{Match: "a/#", Mode: Direct}, {Match: "a/#", Mode: Sequenced}}); err == nil || err.Field != "rules[1].match" {
		t.Errorf("duplicate filter: %v", err)
	}
	if err := validateRules(make([]Rule, MaxRules+1)); err == nil || err.Field != "rules" {
		t.Errorf("too many rules: %v", err)
	}
}

func TestRuleForAndGroups(t *testing.T) {
	s := applyAll(t, PutPolicies([]Rule{
		{Match: "swarm/+/+/#", Mode: Sequenced, Group: "swarm/{2}-{1}"},
		{Match: "swarm/#", Mode: Direct},
		{Match: "+/alerts", Mode: Sequenced, Replicas: 3},
	}))
	tests := []struct {
		topic, match, group string
	}{
		{"swarm/a/b/c/d", "swarm/+/+/#", "swarm/b-a"},
		{"swarm/a/b", "swarm/+/+/#", "swarm/b-a"}, // # matches the parent level too
		{"swarm/a", "swarm/#", "swarm/a"},
		{"swarm", "swarm/#", "swarm"},
		{"x/alerts", "+/alerts", "x/alerts"},
		{"$SYS/alerts", "#", "$SYS/alerts"}, // + at level one does not match $ topics
		{"other", "#", "other"},
	}
	for _, tc := range tests {
		r := s.RuleFor(tc.topic)
		if r.Match != tc.match || r.GroupFor(tc.topic) != tc.group {
			t.Errorf("%s: rule %q group %q, want %q %q", tc.topic, r.Match, r.GroupFor(tc.topic), tc.match, tc.group)
		}
	}
	if r := s.RuleFor("x/alerts"); r.Spread != SpreadZone {
		t.Errorf("replicated rule without spread not defaulted to zone: %+v", r)
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true}, {"a/b", "a/c", false}, {"a/+", "a/b", true}, {"a/+", "a/b/c", false},
		{"a/+", "a", false}, {"a/#", "a", true}, {"a/#", "a/b/c", true}, {"#", "a/b", true},
		{"+/+", "/", true}, {"+", "", true}, {"a//b", "a//b", true}, {"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false}, {"$SYS/#", "$SYS/x", true}, {"a/b", "a/b/c", false},
	} {
		if got := Matches(tc.filter, tc.topic); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v", tc.filter, tc.topic, got)
		}
	}
}

// goldenCommands build the state of the golden snapshots: the first five
// that of snapshot-v1.golden (written before groups existed), all of them
// that of snapshot-v2.golden.
func goldenCommands() []Command {
	n3 := node("edge-3", TierEdge)
	n3.Labels = Labels{Tier: TierEdge}
	n3.JoinedAt = time.Date(2025, 3, 2, 8, 30, 0, 0, time.FixedZone("CET", 3600))
	return []Command{
		RegisterNode(node("core-1", TierCore)),
		RegisterNode(n3),
		RegisterNode(node("core-0", TierCore)),
		PutPolicies([]Rule{{Match: "x", Mode: Direct}}),
		PutPoliciesIf([]Rule{
			{Match: "swarm/+/telemetry", Mode: Sequenced, LatencyMS: 40, Replicas: 3, Spread: SpreadSite, Group: "swarm/{1}",
				Retention: &Retention{Messages: 10000, Duration: Duration(36 * time.Hour)}},
			{Match: "sensors/#", Mode: Sequenced},
			{Match: "chat/+", Mode: Direct, LatencyMS: 100},
		}, 1),
		CreateGroup(Group{ID: "swarm/7", Rule: "swarm/+/telemetry", Home: "core-0", Voters: []string{"core-0", "core-1", "edge-3"},
			Retention: Retention{Messages: 10000, Duration: Duration(36 * time.Hour)}, Created: t0.In(time.FixedZone("CET", 3600))}),
		CreateGroup(Group{ID: "sensors/a", Rule: "sensors/#", Home: "edge-3", Voters: []string{"edge-3"}, Created: t0.Add(time.Minute)}),
		SetGroupHome(HomeChange{Group: "swarm/7", Home: "core-1", Epoch: 2, Reason: ReasonFailover, At: t0.Add(time.Hour)}),
		SetGroupMembers(MembersChange{Group: "swarm/7", Epoch: 2, Voters: []string{"core-1", "edge-3", "core-0"}, Learners: []string{"n9"}}),
	}
}

func goldenState(t *testing.T) State {
	t.Helper()
	return applyAll(t, append([]Command{RegisterNode(node("n9", TierEdge))}, goldenCommands()...)...)
}

func TestSnapshotGolden(t *testing.T) {
	s := goldenState(t)
	got := s.Snapshot()
	path := filepath.Join("testdata", "snapshot-v2.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("snapshot changed (run with -update if intended):\n got %s\nwant %s", got, want)
	}
	r, err := Restore(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), want) {
		t.Fatalf("restore then snapshot differs:\n got %s\nwant %s", r.Snapshot(), want)
	}
	if g, ok := r.Group("swarm/7"); r.Applied() != 10 || !ok || g.Home != "core-1" || g.Epoch != 2 || g.HomeReason != ReasonFailover || len(g.Learners) != 1 {
		t.Errorf("restored state wrong: applied %d, group %+v", r.Applied(), g)
	}
	if !bytes.Equal(State{}.Snapshot(), []byte(`{"v":2,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[]}`)) {
		t.Errorf("empty snapshot %s", State{}.Snapshot())
	}
}

// TestSnapshotV1StillReads: a snapshot written before groups existed
// restores to the state it was taken from, which then snapshots as v2.
func TestSnapshotV1StillReads(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "snapshot-v1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(old)
	if err != nil {
		t.Fatal(err)
	}
	want := applyAll(t, goldenCommands()[:5]...)
	if !bytes.Equal(r.Snapshot(), want.Snapshot()) {
		t.Fatalf("v1 snapshot restored as\n%s\nwant\n%s", r.Snapshot(), want.Snapshot())
	}
	if r.Applied() != 5 || r.RuleFor("swarm/7/telemetry").GroupFor("swarm/7/telemetry") != "swarm/7" || r.GroupCount() != 0 {
		t.Errorf("restored state wrong: applied %d", r.Applied())
	}
}

const groupJSON = `{"id":"g","rule":"g/#","home":"a","voters":["a"],"epoch":1,"retention":{},"created":"2025-01-01T00:00:00Z","home_reason":"created","home_since":"2025-01-01T00:00:00Z"}`

func TestRestoreRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not json":        `nope`,
		"version":         `{"v":3,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[]}`,
		"v2 no groups":    `{"v":2,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]}}`,
		"v1 with groups":  `{"v":1,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[]}`,
		"duplicate group": `{"v":2,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[` + groupJSON + `,` + groupJSON + `]}`,
		"home not voter":  `{"v":2,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[` + strings.Replace(groupJSON, `"home":"a"`, `"home":"b"`, 1) + `]}`,
		"epoch 0":         `{"v":2,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[` + strings.Replace(groupJSON, `"epoch":1`, `"epoch":0`, 1) + `]}`,
		"unknown field":   `{"v":1,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"x":1}`,
		"trailing":        `{"v":1,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]}} {}`,
		"duplicate node":  `{"v":1,"applied":0,"nodes":[{"id":"a","labels":{"tier":"edge"},"joined_at":"2025-01-01T00:00:00Z"},{"id":"a","labels":{"tier":"edge"},"joined_at":"2025-01-01T00:00:00Z"}],"policies":{"version":0,"rules":[]}}`,
		"bad rule":        `{"v":1,"applied":0,"nodes":[],"policies":{"version":0,"rules":[{"match":"a/#/b","mode":"direct"}]}}`,
		"bad duration":    `{"v":1,"applied":0,"nodes":[],"policies":{"version":0,"rules":[{"match":"a","mode":"sequenced","retention":{"duration":5}}]}}`,
	} {
		if _, err := Restore([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Restore([]byte(`{"v":2,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[` + groupJSON + `]}`)); err != nil {
		t.Errorf("valid group rejected: %v", err)
	}
	_, err := Restore([]byte(`{"v":1,"applied":0,"nodes":[],"policies":{"version":0,"rules":[{"match":"a","mode":"x"}]}}`))
	var fe *Error
	if !errors.As(err, &fe) || fe.Field != "policies.rules[0].mode" {
		t.Errorf("field path: %v", err)
	}
}

func TestCommandRoundTrip(t *testing.T) {
	cmds := []Command{
		RegisterNode(node("n1", TierCore)),
		RemoveNode("n1"),
		PutPolicies(nil),
		PutPoliciesIf([]Rule{{Match: "a/+", Mode: Sequenced, Group: "{1}", Retention: &Retention{Messages: 5}}}, 7),
	}
	for _, c := range cmds {
		b, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("%s: %v", c.Op, err)
		}
		back, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("%s: decode %s: %v", c.Op, b, err)
		}
		b2, _ := EncodeCommand(back)
		if !bytes.Equal(b, b2) {
			t.Errorf("%s: %s re-encodes as %s", c.Op, b, b2)
		}
	}
	if _, err := EncodeCommand(Command{Op: OpRemoveNode}); !errors.Is(err, ErrInvalid) {
		t.Errorf("encoding an invalid command: %v", err)
	}
	for name, in := range map[string]string{
		"no version":   `{"op":"remove_node","node_id":"a"}`,
		"unknown":      `{"v":1,"op":"remove_node","node_id":"a","extra":true}`,
		"wrong fields": `{"v":1,"op":"remove_node","node_id":"a","rules":[]}`,
		"bad time":     `{"v":1,"op":"register_node","node":{"id":"a","labels":{"tier":"edge"},"joined_at":"9999-12-31T23:00:00-05:00"}}`,
	} {
		if _, err := DecodeCommand([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestLabelsValidation(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:1883", "[::1]:1883", "broker.example:8883"} {
		if !hostPort(addr) {
			t.Errorf("%q rejected", addr)
		}
	}
	for _, addr := range []string{"10.0.0.1", ":1883", "h:0", "h:65536", "h:01", "::1:80", "[::1:80", "a b:1"} {
		if hostPort(addr) {
			t.Errorf("%q accepted", addr)
		}
	}
}

func TestApplyEncoded(t *testing.T) {
	b, err := EncodeCommand(RegisterNode(node("n1", TierEdge)))
	if err != nil {
		t.Fatal(err)
	}
	s, res := State{}.ApplyEncoded(4, b)
	if res.Err() != nil || len(s.Nodes()) != 1 || s.Applied() != 4 {
		t.Fatalf("valid command: %+v, %d nodes", res, len(s.Nodes()))
	}
	s2, res := s.ApplyEncoded(5, []byte("garbage"))
	if !errors.Is(res.Err(), ErrInvalid) || s2.Applied() != 5 || len(s2.Nodes()) != 1 {
		t.Fatalf("garbage: %+v, applied %d", res, s2.Applied())
	}
}
