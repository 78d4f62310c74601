package migration

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func rec(home string, epoch uint64, voters, learners []string, to string, want []string, reason fsm.Reason) fsm.Group {
	return fsm.Group{ID: "g", Rule: "g/#", Home: home, Voters: voters, Learners: learners, Epoch: epoch,
		Desired: &fsm.Desired{Home: to, Voters: want, Reason: reason, Epoch: epoch, Index: 7, At: time.Unix(0, 0)}}
}

func ok() Outcome               { return Outcome{Result: ResultOK} }
func failed(err string) Outcome { return Outcome{Result: ResultFailed, Err: err} }
func unknown() Outcome          { return Outcome{Result: ResultUnknown, Err: "timeout"} }
func conflict(g fsm.Group) Outcome {
	return Outcome{Result: ResultConflict, Err: "epoch", Record: &g}
}

// TestMachineTrace runs each scenario's outcomes through a machine and
// compares the actions it took with testdata/machine.golden.
func TestMachineTrace(t *testing.T) {
	one := rec("a", 4, []string{"a"}, nil, "b", []string{"b"}, fsm.ReasonManual)
	three := rec("a", 2, []string{"a", "c", "d"}, nil, "b", []string{"b", "c", "d"}, fsm.ReasonViolation)
	moved := one
	moved.Home, moved.Voters, moved.Epoch, moved.Desired = "b", []string{"b"}, 5, nil
	reclaimed := one
	reclaimed.Epoch = 5
	elsewhere := one
	elsewhere.Home, elsewhere.Voters, elsewhere.Epoch = "c", []string{"c"}, 5
	settle := rec("b", 3, []string{"a", "c", "d", "b"}, nil, "b", []string{"b", "c", "d"}, fsm.ReasonViolation)
	scenarios := []struct {
		name     string
		self     string
		rec      fsm.Group
		outcomes []Outcome
		recover  bool // Recover (a restart during the handover) rather than Plan
	}{
		{"replicas 1: handover", "a", one, []Outcome{ok(), ok(), ok(), ok(), ok(), ok()}, false},
		{"replicas 1: snapshot fails", "a", one, []Outcome{failed("link down"), ok()}, false},
		{"replicas 1: switch refused, nothing to undo but the staging", "a", one, []Outcome{ok(), conflict(elsewhere), ok()}, false},
		{"replicas 1: switch unknown, then committed", "a", one, []Outcome{ok(), unknown(), conflict(moved), ok(), ok(), ok(), ok()}, false},
		{"replicas 1: tail lost after the switch: fenced, resumed", "a", one, []Outcome{ok(), ok(), ok(), unknown()}, false},
		{"replicas 1: tail refused after the switch: fenced, resumed", "a", one, []Outcome{ok(), ok(), ok(), failed("no handover staged")}, false},
		{"replicas 1: fence does not drain after the switch: fenced, resumed", "a", one, []Outcome{ok(), ok(), failed("deadline")}, false},
		{"replicas 1: target slow to serve", "a", one, []Outcome{ok(), ok(), ok(), ok(), ok(), failed("deadline")}, false},
		{"replicas 3: new replica, then lead", "a", three, []Outcome{ok(), ok(), ok(), ok(), ok(), ok(), ok(), ok(), ok()}, false},
		{"replicas 3: leadership only", "a", rec("a", 2, []string{"a", "b", "c"}, nil, "b", []string{"b", "a", "c"}, fsm.ReasonOverload),
			[]Outcome{ok(), ok(), ok(), ok()}, false},
		{"replicas 3: transfer fails", "a", rec("a", 2, []string{"a", "b", "c"}, nil, "b", []string{"b", "a", "c"}, fsm.ReasonManual),
			[]Outcome{ok(), failed("not caught up"), ok()}, false},
		{"replicas 3: the new home settles", "b", settle, []Outcome{ok(), ok()}, false},
		{"not the home", "b", one, nil, false},
		{"recover: the reclaim wins", "a", one, []Outcome{ok(), ok(), ok()}, true},
		{"recover: the reclaim unknown, then an earlier attempt won", "a", one, []Outcome{unknown(), conflict(reclaimed), ok(), ok()}, true},
		{"recover: the switch had won, the log handed over again", "a", one, []Outcome{conflict(moved), ok(), ok(), ok(), ok(), ok()}, true},
		{"recover: the switch had won, the target still down", "a", one, []Outcome{conflict(moved), ok(), failed("link down")}, true},
		{"recover: the record moved elsewhere", "a", one, []Outcome{conflict(elsewhere), ok()}, true},
	}
	var out strings.Builder
	for _, sc := range scenarios {
		fmt.Fprintf(&out, "== %s (on %s: home %s epoch %d voters %v learners %v; decided %s %v %s)\n", sc.name, sc.self,
			sc.rec.Home, sc.rec.Epoch, sc.rec.Voters, sc.rec.Learners, sc.rec.Desired.Home, sc.rec.Desired.Voters, sc.rec.Desired.Reason)
		m, a, ok := Plan(sc.self, sc.rec)
		if sc.recover {
			m, a = Recover(sc.self, sc.rec.ID, sc.rec.Desired.Home, sc.rec.Epoch+1, fsm.ReasonManual)
		}
		if !ok {
			out.WriteString("   nothing to do here\n")
			continue
		}
		fmt.Fprintf(&out, "   kind %s, home reason %s\n", m.Kind, m.Reason)
		more := m.State == StateRunning
		for i := 0; more; i++ {
			fmt.Fprintf(&out, "-> %s (paused %v)\n", a, m.Paused)
			if i >= len(sc.outcomes) {
				t.Fatalf("%s: the machine asked for more than the %d outcomes given", sc.name, len(sc.outcomes))
			}
			o := sc.outcomes[i]
			fmt.Fprintf(&out, "<- %s\n", describe(o))
			a, more = m.Step(o)
		}
		fmt.Fprintf(&out, "   %s paused=%v resume=%v err=%q\n", m.State, m.Paused, m.Resume, m.Err)
	}
	golden := filepath.Join("testdata", "machine.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("trace differs from %s (rerun with -update and review the diff):\n%s", golden, got)
	}
}

// TestMachineNeverEndsFenced: whatever the outcomes, a migration that ends
// failed before its switch leaves the group unfenced; one whose switch
// committed never lifts the fence nor tells the target to drop what it
// was handed, and ends fenced only to be resumed.
func TestMachineNeverEndsFenced(t *testing.T) {
	recs := []fsm.Group{
		rec("a", 4, []string{"a"}, nil, "b", []string{"b"}, fsm.ReasonManual),
		rec("a", 2, []string{"a", "c", "d"}, nil, "b", []string{"b", "c", "d"}, fsm.ReasonViolation),
	}
	results := []Result{ResultOK, ResultFailed, ResultConflict, ResultUnknown}
	// Every sequence of outcomes up to 12 steps, over the four results,
	// with unknowns capped so proposals end.
	var walk func(m Machine, a Action, depth, unknowns int)
	walk = func(m Machine, a Action, depth, unknowns int) {
		if depth > 12 {
			return
		}
		for _, r := range results {
			if r == ResultUnknown && unknowns >= 2 {
				continue
			}
			mm := m
			mm.queue = append([]Action(nil), m.queue...)
			o := Outcome{Result: r}
			next, more := mm.Step(o)
			u := unknowns
			if r == ResultUnknown {
				u++
			}
			if !more {
				// Fenced at the end only when the switch committed and
				// the target still needs the tail: resumed then.
				if mm.Paused && mm.State == StateFailed && !(mm.Resume && mm.Committed) {
					t.Fatalf("ended %s fenced after %s/%s: %s", mm.State, a.Op, r, mm.Err)
				}
				if mm.Resume && !mm.Paused {
					t.Fatalf("to resume but not fenced after %s/%s: %s", a.Op, r, mm.Err)
				}
				continue
			}
			if mm.Committed && next.Op == OpAbort {
				t.Fatalf("the target told to drop its staging after the switch committed (%s/%s)", a.Op, r)
			}
			if mm.Committed && next.Op == OpUnfence && !next.Redirect {
				t.Fatalf("the fence lifted after the switch committed (%s/%s)", a.Op, r)
			}
			walk(mm, next, depth+1, u)
		}
	}
	for _, g := range recs {
		m, a, _ := Plan("a", g)
		walk(*m, a, 0, 0)
	}
	m, a := Recover("a", "g", "b", 5, fsm.ReasonManual)
	walk(*m, a, 0, 0)
}
