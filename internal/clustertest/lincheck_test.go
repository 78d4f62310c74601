package clustertest

import (
	"strings"
	"testing"
)

// TestLogModel: the log model accepts a history whose reads follow the
// appends' real-time order, and refuses a read that misses an append
// acknowledged before it began (a stale read), one that finds an index
// before its append began, and a latest that goes backwards.
func TestLogModel(t *testing.T) {
	final := map[string][]string{"t": {"a", "b"}}
	build := func(script func(r *LinRecorder)) *LinRecorder {
		r := NewLinRecorder()
		script(r)
		return r
	}
	good := build(func(r *LinRecorder) {
		r.Attempt(0, "t", "a")
		call := r.Now()
		r.Acked("a")
		r.Read(1, "t", 1, call, true, "a", "") // concurrent with nothing: after a's ack
		r.Attempt(0, "t", "b")
		call = r.Now()
		r.Read(1, "t", 2, call, false, "", "") // b not yet acknowledged: may miss it
		r.Acked("b")
		call = r.Now()
		r.Latest(1, "t", call, 2, "")
	})
	if err := good.CheckLinearizable(final, t.TempDir(), 0); err != nil {
		t.Fatalf("a linearizable history refused: %v", err)
	}
	bad := map[string]func(r *LinRecorder){
		"stale read": func(r *LinRecorder) {
			r.Attempt(0, "t", "a")
			r.Acked("a")
			call := r.Now()
			r.Read(1, "t", 1, call, false, "", "")
		},
		"read from the future": func(r *LinRecorder) {
			call := r.Now()
			r.Read(1, "t", 1, call, true, "a", "")
			r.Attempt(0, "t", "a")
			r.Acked("a")
		},
		"latest goes back": func(r *LinRecorder) {
			r.Attempt(0, "t", "a")
			r.Attempt(0, "t", "b")
			call := r.Now()
			r.Latest(1, "t", call, 2, "")
			call = r.Now()
			r.Latest(1, "t", call, 1, "")
		},
		"acknowledged out of order": func(r *LinRecorder) {
			r.Attempt(0, "t", "b")
			r.Acked("b")
			r.Attempt(0, "t", "a") // a is index 1, invoked after b (index 2) returned
			r.Acked("a")
		},
	}
	for name, script := range bad {
		dir := t.TempDir()
		err := build(script).CheckLinearizable(final, dir, 0)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want a violation with a visualization in %s", name, err, dir)
		}
	}
}
