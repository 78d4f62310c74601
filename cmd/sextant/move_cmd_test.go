package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestTopicsMoveCommand: `sextant topics move` on one node: a clear error
// for an unknown node, for a topic that is not sequenced, and for a missing
// --to; a move to where the group is says so.
func TestTopicsMoveCommand(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	admin := n.Addr("admin")
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - match: seq/#\n    mode: sequenced\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool {
		code, _, _ := runCLI(t, "policy", "set", "--admin", admin, "-f", rules)
		return code == 0
	}, "policy set succeeds")
	c := n.ConnectV5(&paho.Connect{ClientID: "p", CleanStart: true, KeepAlive: 30})
	c.Pub("seq/a", 1, false, "x") // creates the group, homed here

	code, _, errOut := runCLI(t, "topics", "move", "seq/a", "--to", "ghost", "--admin", admin)
	if code == 0 || !strings.Contains(errOut, "cannot move seq/a") || !strings.Contains(errOut, "not registered") {
		t.Fatalf("move to an unknown node: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "topics", "move", "plain/topic", "--to", "test", "--admin", admin)
	if code == 0 || !strings.Contains(errOut, "no placement group") {
		t.Fatalf("move of a direct topic: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "topics", "move", "seq/a", "--admin", admin)
	if code == 0 || !strings.Contains(errOut, "--to") {
		t.Fatalf("move without --to: %d %q", code, errOut)
	}
	code, out, errOut := runCLI(t, "topics", "move", "seq/a", "--to", "test", "--admin", admin)
	if code != 0 || !strings.Contains(out, "already homed on test") {
		t.Fatalf("move to where it is: %d %q %q", code, out, errOut)
	}
}
