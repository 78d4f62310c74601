package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestPolicyFileErrorsNameTheField: a policy file with a mistake is
// refused before it is sent, naming the rule and the field.
func TestPolicyFileErrorsNameTheField(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ yaml, want string }{
		{"rules:\n  - match: a/#\n    mode: direct\n  - match: b/#\n    mode: direct\n    latency: 40\n", `rules[1]: unknown field "latency"; did you mean latency_ms?`},
		{"rules:\n  - match: a/#\n    mode: direct\n    latency_ms: fast\n", "rules[0].latency_ms: want a whole number, got a string"},
		{"rules:\n  - match: a/#\n    mode: sequenced\n    retention: {duration: 36}\n", "rules[0].retention.duration: want a duration such as 36h"},
		{"rules:\n  - match: a/#\n    mode: sequenced\n    retention: {days: 3}\n", `rules[0].retention: unknown field "days"`},
		{"rules: a/#\n", "rules: want a list of rules"},
		{"rule:\n  - match: a/#\n", `unknown field "rule"`},
		{"- match: a/#\n", "want a mapping with a rules list"},
	} {
		f := filepath.Join(dir, "rules.yaml")
		os.WriteFile(f, []byte(c.yaml), 0o644)
		code, _, errOut := runCLI(t, "policy", "set", "--admin", "127.0.0.1:1", "-f", f)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want one line with %q", c.yaml, code, errOut, c.want)
		}
	}
}

// TestPolicySetThenGetOnAnotherNode: a policy written through one node is
// read on another with --min-version, which waits for that node's copy to
// catch up; policy set says how.
func TestPolicySetThenGetOnAnotherNode(t *testing.T) {
	c1 := brokertest.Config(t)
	c1.NodeID, c1.ClusterAddr = "p1", brokertest.FreeAddr(t)
	n1 := brokertest.Start(t, c1)
	c2 := brokertest.Config(t)
	c2.NodeID, c2.ClusterAddr, c2.Join = "p2", brokertest.FreeAddr(t), []string{c1.ClusterAddr}
	n2 := brokertest.Start(t, c2)
	brokertest.Eventually(t, 30*time.Second, func() bool { return len(n2.Cluster(t.Context()).Servers) == 2 }, "p2 in the metadata group")

	f := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(f, []byte("rules:\n  - match: fleet/#\n    mode: direct\n    latency_ms: 30\n"), 0o644)
	var out string
	brokertest.Eventually(t, 20*time.Second, func() bool {
		var code int
		code, out, _ = runCLI(t, "policy", "set", "--admin", n1.Addr("admin"), "-f", f)
		return code == 0
	}, "policy set through p1")
	if !strings.Contains(out, "policy version 1: 1 rules") || !strings.Contains(out, "--min-version 1") {
		t.Fatalf("policy set: %q", out)
	}
	code, got, errOut := runCLI(t, "policy", "get", "--admin", n2.Addr("admin"), "--min-version", "1")
	if code != 0 || !strings.Contains(got, "fleet/#") || !strings.Contains(got, "version: 1") {
		t.Fatalf("policy get on p2: %d %q %q", code, got, errOut)
	}
}
