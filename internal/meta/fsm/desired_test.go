package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func desire(group, home string, epoch uint64, reason Reason, voters ...string) Command {
	return SetGroupDesired(DesiredChange{Group: group, Epoch: epoch, Home: home, Voters: voters, Reason: reason, At: t0.Add(time.Minute)})
}

// A decision is recorded against the group's epoch, carried out by set-home
// and set-members, and cleared by the state machine when the record
// matches it; a manual decision stands against the manager's.
func TestDesiredPlacement(t *testing.T) {
	later := t0.Add(time.Hour)
	pending := func(home string, reason Reason, index uint64) func(*testing.T, State, Result) {
		return func(t *testing.T, s State, r Result) {
			t.Helper()
			g := mustGroup(t, s, "g/1")
			d := g.Desired
			if d == nil || d.Home != home || d.Reason != reason || d.Index != index || d.Epoch != g.Epoch || !d.At.Equal(t0.Add(time.Minute)) {
				t.Errorf("desired %+v, want home %s reason %s index %d", d, home, reason, index)
			}
			if r.Group == nil || r.Group.Desired == nil || r.Group.Desired.Index != d.Index {
				t.Errorf("result record %+v", r.Group)
			}
		}
	}
	settled := func(t *testing.T, s State, _ Result) {
		t.Helper()
		if g := mustGroup(t, s, "g/1"); g.Desired != nil {
			t.Errorf("decision %+v still pending on %+v", g.Desired, g)
		}
	}
	runApplyCases(t, []applyCase{
		{name: "register a", cmd: RegisterNode(node("a", TierCore))},
		{name: "register b", cmd: RegisterNode(node("b", TierCore))},
		{name: "register c", cmd: RegisterNode(node("c", TierEdge))},
		{name: "create on a", cmd: CreateGroup(group("g/1", "a", "a"))},
		{name: "no such group", cmd: desire("g/9", "b", 1, ReasonViolation, "b"), code: CodeNotFound, field: "desired.group"},
		{name: "stale epoch", cmd: desire("g/1", "b", 2, ReasonViolation, "b"), code: CodeConflict, field: "desired.epoch",
			check: func(t *testing.T, _ State, r Result) {
				if r.Group == nil || r.Group.Epoch != 1 {
					t.Errorf("conflict carries %+v, want the record", r.Group)
				}
			}},
		{name: "unknown node", cmd: desire("g/1", "ghost", 1, ReasonViolation, "ghost"), code: CodeNotFound, field: "desired.voters[0]"},
		{name: "home outside voters", cmd: desire("g/1", "b", 1, ReasonViolation, "c"), code: CodeInvalid, field: "desired.home"},
		{name: "created is no decision reason", cmd: desire("g/1", "b", 1, ReasonCreated, "b"), code: CodeInvalid, field: "desired.reason"},
		{name: "violation: move to b", cmd: desire("g/1", "b", 1, ReasonViolation, "b"), check: pending("b", ReasonViolation, 10)},
		{name: "a newer decision replaces it", cmd: desire("g/1", "c", 1, ReasonOverload, "c"), check: pending("c", ReasonOverload, 11)},
		{name: "manual replaces the manager's", cmd: desire("g/1", "b", 1, ReasonManual, "b"), check: pending("b", ReasonManual, 12)},
		{name: "the manager cannot replace a manual one", cmd: desire("g/1", "c", 1, ReasonViolation, "c"), code: CodeConflict, field: "desired.reason"},
		{name: "cancel another decision", cmd: CancelGroupDesired(DesiredCancel{Group: "g/1", Index: 10}), code: CodeConflict, field: "cancel.index"},
		// The executor carries it out: b joins, becomes home, a leaves.
		{name: "add b", cmd: SetGroupMembers(MembersChange{Group: "g/1", Epoch: 1, Voters: []string{"a", "b"}}), check: pending("b", ReasonManual, 12)},
		{name: "home to b", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "b", Epoch: 2, Reason: ReasonManual, At: later}),
			check: func(t *testing.T, s State, r Result) {
				if g := mustGroup(t, s, "g/1"); g.Desired == nil || g.Home != "b" {
					t.Errorf("cleared before the voters settled: %+v", g)
				}
			}},
		{name: "a leaves: reached", cmd: SetGroupMembers(MembersChange{Group: "g/1", Epoch: 2, Voters: []string{"b"}}), check: settled},
		{name: "nothing to cancel", cmd: CancelGroupDesired(DesiredCancel{Group: "g/1", Index: 12}), code: CodeConflict, field: "cancel.index"},
		{name: "decided again", cmd: desire("g/1", "c", 2, ReasonRebalance, "c"), check: pending("c", ReasonRebalance, 19)},
		{name: "a decision for where it is cancels", cmd: desire("g/1", "b", 2, ReasonManual, "b"), check: settled},
		{name: "decided once more", cmd: desire("g/1", "c", 2, ReasonOverload, "c"), check: pending("c", ReasonOverload, 21)},
		{name: "cancelled by index", cmd: CancelGroupDesired(DesiredCancel{Group: "g/1", Index: 21}), check: settled},
		{name: "a failover keeps a pending decision", cmd: desire("g/1", "c", 2, ReasonViolation, "c"), check: pending("c", ReasonViolation, 23)},
		{name: "failover to b (epoch 3)", cmd: SetGroupHome(HomeChange{Group: "g/1", Home: "b", Epoch: 3, Reason: ReasonFailover, At: later}),
			check: func(t *testing.T, s State, _ Result) {
				if g := mustGroup(t, s, "g/1"); g.Desired == nil || g.Desired.Epoch != 2 || g.Desired.Home != "c" {
					t.Errorf("record %+v", g)
				}
				if ds := s.Decisions("b"); len(ds) != 1 || ds[0].ID != "g/1" {
					t.Errorf("Decisions(b) = %v", ids(ds))
				}
				if ds := s.Decisions("a"); len(ds) != 0 {
					t.Errorf("Decisions(a) = %v", ids(ds))
				}
				if ds := s.Decisions(""); len(ds) != 1 {
					t.Errorf("Decisions() = %v", ids(ds))
				}
			}},
	})
}

func TestDesiredSnapshotAndRestore(t *testing.T) {
	s := applyAll(t, RegisterNode(node("a", TierCore)), RegisterNode(node("b", TierCore)),
		CreateGroup(group("g/1", "a", "a")), desire("g/1", "b", 1, ReasonViolation, "b"))
	snap := s.Snapshot()
	r, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) {
		t.Fatal("restore not exact")
	}
	if g := mustGroup(t, r, "g/1"); g.Desired == nil || g.Desired.Home != "b" || g.Desired.Index != 4 {
		t.Fatalf("restored %+v", g.Desired)
	}
	// A group record with a decision the state machine could not have left.
	var decoded struct {
		Groups []map[string]json.RawMessage `json:"groups"`
	}
	if err := json.Unmarshal(snap, &decoded); err != nil {
		t.Fatal(err)
	}
	good := string(decoded.Groups[0]["desired"])
	for name, bad := range map[string]string{
		"home not a voter": strings.Replace(good, `"voters":["b"]`, `"voters":["a"]`, 1),
		"reached":          strings.Replace(strings.Replace(good, `"voters":["b"]`, `"voters":["a"]`, 1), `"home":"b"`, `"home":"a"`, 1),
		"created reason":   strings.Replace(good, `"violation"`, `"created"`, 1),
		"future epoch":     strings.Replace(good, `"epoch":1`, `"epoch":2`, 1),
		"index 0":          strings.Replace(good, `"index":4`, `"index":0`, 1),
	} {
		if bad == good {
			t.Fatalf("%s: the mutation did not apply to %s", name, good)
		}
		in := strings.Replace(string(snap), good, bad, 1)
		if _, err := Restore([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: restore err %v, want ErrInvalid", name, err)
		}
	}
	// Records are copies: changing one does not change the state.
	g := mustGroup(t, s, "g/1")
	g.Desired.Voters[0] = "x"
	if mustGroup(t, s, "g/1").Desired.Voters[0] != "b" {
		t.Fatal("a returned record shares the state's voters")
	}
}

func TestDesiredCommandValidation(t *testing.T) {
	ok := DesiredChange{Group: "g", Epoch: 1, Home: "a", Voters: []string{"a"}, Reason: ReasonManual, At: t0}
	for name, c := range map[string]Command{
		"no epoch":        SetGroupDesired(func() DesiredChange { d := ok; d.Epoch = 0; return d }()),
		"no time":         SetGroupDesired(func() DesiredChange { d := ok; d.At = time.Time{}; return d }()),
		"no reason":       SetGroupDesired(func() DesiredChange { d := ok; d.Reason = ""; return d }()),
		"failover reason": SetGroupDesired(func() DesiredChange { d := ok; d.Reason = ReasonFailover; return d }()),
		"no voters":       SetGroupDesired(func() DesiredChange { d := ok; d.Voters = nil; return d }()),
		"bad group":       SetGroupDesired(func() DesiredChange { d := ok; d.Group = ""; return d }()),
		"cancel index 0":  CancelGroupDesired(DesiredCancel{Group: "g"}),
		"extra field":     {Op: OpSetGroupDesired, Desired: &ok, GroupID: "g"},
		"create with it":  CreateGroup(func() Group { g := group("g", "a", "a"); g.Desired = &Desired{}; return g }()),
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, c := range []Command{SetGroupDesired(ok), CancelGroupDesired(DesiredCancel{Group: "g", Index: 3})} {
		b, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeCommand(b)
		if err != nil {
			t.Fatal(err)
		}
		if b2, _ := EncodeCommand(back); !bytes.Equal(b, b2) {
			t.Errorf("%s re-encodes as %s", b, b2)
		}
	}
}
