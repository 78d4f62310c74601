// Package sequencertest holds test helpers for the sequencer and the
// packages around it: reading a topic log's files from a MemFS to check
// that replicas hold byte-identical logs. Test code only.
package sequencertest

import (
	"bytes"
	"maps"
	"path"
	"slices"
	"testing"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// Files returns the files of the log in dir by name.
func Files(t testing.TB, fsys *topiclog.MemFS, dir string) map[string][]byte {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := fsys.ReadFile(path.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// SameFiles fails the test unless a and b (from Files) are byte-identical.
func SameFiles(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	if !maps.EqualFunc(a, b, bytes.Equal) {
		t.Fatalf("%s: logs differ: %v vs %v", what, slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
	}
}
