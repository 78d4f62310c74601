package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
)

func TestNodesAndPolicyCommands(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	admin := n.Addr("admin")

	code, out, errOut := runCLI(t, "nodes", "--admin", admin)
	if code != 0 || !strings.Contains(out, "NODE") || !strings.Contains(out, "test") {
		t.Fatalf("nodes: code %d out %q err %q", code, out, errOut)
	}

	dir := t.TempDir()
	good := filepath.Join(dir, "rules.yaml")
	os.WriteFile(good, []byte("rules:\n  - match: swarm/+/#\n    mode: sequenced\n    replicas: 3\n    latency_ms: 40\n"), 0o644)
	// The single node's metadata group elects itself leader in under a
	// second; the command waits for it.
	var setOut string
	brokertest.Eventually(t, 10*time.Second, func() bool {
		code, setOut, _ = runCLI(t, "policy", "set", "--admin", admin, "-f", good)
		return code == 0
	}, "policy set succeeds")
	if !strings.Contains(setOut, "1 rules") {
		t.Fatalf("policy set: %q", setOut)
	}
	code, out, _ = runCLI(t, "policy", "get", "--admin", admin)
	if code != 0 || !strings.Contains(out, "swarm/+/#") || !strings.Contains(out, "sequenced") {
		t.Fatalf("policy get: %d %q", code, out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("rules:\n  - match: a/#/b\n    mode: direct\n"), 0o644)
	code, _, errOut = runCLI(t, "policy", "set", "--admin", admin, "-f", bad)
	if code == 0 || !strings.Contains(errOut, "HTTP 400") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("invalid rule: code %d stderr %q (want one line naming HTTP 400)", code, errOut)
	}

	code, _, errOut = runCLI(t, "nodes", "--admin", "127.0.0.1:1")
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("unreachable admin: code %d stderr %q", code, errOut)
	}
}
