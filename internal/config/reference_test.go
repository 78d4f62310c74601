package config

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's configuration reference")

const (
	refStart = "<!-- config-reference:start -->\n"
	refEnd   = "<!-- config-reference:end -->"
)

// TestREADMEConfigReference keeps the README's configuration table equal to
// the config struct (run with -update to rewrite it).
func TestREADMEConfigReference(t *testing.T) {
	const path = "../../README.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, refStart), strings.Index(s, refEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q ... %q markers", strings.TrimSpace(refStart), refEnd)
	}
	want := s[:i+len(refStart)] + Reference() + s[j:]
	if want == s {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README.md's configuration reference is stale: run go test ./internal/config -update")
}
