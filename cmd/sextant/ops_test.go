package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/sextantmq/sextant/internal/brokertest"
)

func TestVersionFlagAndCommand(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := runCLI(t, args...)
		if code != 0 || !strings.HasPrefix(out, "sextant ") || !strings.Contains(out, "go:      go1.") || !strings.Contains(out, "commit:") {
			t.Fatalf("%v: code %d, out %q", args, code, out)
		}
	}
	code, out, _ := runCLI(t, "version", "--short")
	if code != 0 || strings.Count(out, "\n") != 1 || strings.Contains(out, " ") {
		t.Fatalf("version --short: %d %q", code, out)
	}
}

// The layers of configuration: defaults, then the file, then SEXTANT_
// variables, then flags given on the command line.
func TestServeConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sextant.yaml")
	os.WriteFile(file, []byte("mqtt-addr: 127.0.0.1:1001\nmax-inflight: 11\nmax-keepalive: 111\n"), 0o644)
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("sextant"), kong.Exit(func(int) { t.Fatal("exit") }), cliVars())
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := parser.Parse([]string{"serve", "--config", file, "--mqtt-addr", "127.0.0.1:1003"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, unknown, err := cli.Serve.resolve(kctx, []string{
		"SEXTANT_MQTT_ADDR=127.0.0.1:1002", "SEXTANT_MAX_INFLIGHT=22", "SEXTANT_WS_ADDR=", "SEXTANT_NOPE=1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MQTTAddr != "127.0.0.1:1003" || cfg.MaxInflight != 22 || cfg.MaxKeepAlive != 111 || cfg.WSAddr != "" || cfg.AdminAddr != "127.0.0.1:8088" {
		t.Fatalf("flag > env > file > default broken: %+v", cfg)
	}
	if len(unknown) != 1 || unknown[0] != "SEXTANT_NOPE" {
		t.Fatalf("unknown %q", unknown)
	}
	if _, _, err := cli.Serve.resolve(kctx, []string{"SEXTANT_MAX_INFLIGHT=many"}); err == nil || !strings.Contains(err.Error(), "SEXTANT_MAX_INFLIGHT") {
		t.Fatalf("a bad variable: %v", err)
	}
}

func TestHealthCommand(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	code, out, errOut := runCLI(t, "health", "--admin", n.Addr("admin"))
	if code != 0 || out != "ready\n" {
		t.Fatalf("healthy node: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "health", "-q", "--admin", "127.0.0.1:1", "--timeout", "1s")
	if code != 1 || out != "" {
		t.Fatalf("unreachable node: %d %q", code, out)
	}
}

// sextant node drain drains a node through its admin API: it reports what
// happened and the node asks to be stopped; /readyz says so meanwhile.
func TestNodeDrainCommand(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	c := n.Dial()
	defer c.Close()
	code, out, errOut := runCLI(t, "node", "drain", "--admin", n.Addr("admin"), "--timeout", "2s")
	if code != 0 || !strings.Contains(out, "node test drained") || !strings.Contains(out, "the node is stopping") {
		t.Fatalf("drain: %d %q %q", code, out, errOut)
	}
	select {
	case <-n.Stopping():
	case <-time.After(10 * time.Second):
		t.Fatal("the drained node did not ask to stop")
	}
	code, _, errOut = runCLI(t, "health", "--admin", n.Addr("admin"))
	if code == 0 || !strings.Contains(errOut, "draining") {
		t.Fatalf("health of a drained node: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "node", "drain", "--admin", n.Addr("admin"))
	if code == 0 || !strings.Contains(errOut, "HTTP 409") {
		t.Fatalf("second drain: %d %q", code, errOut)
	}
}

// What `policy get` prints restores with `policy set -f` (the backup of the
// policies that docs/operations.md describes).
func TestPolicyBackupRestores(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	admin := n.Addr("admin")
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	os.WriteFile(rules, []byte("rules:\n  - match: swarm/+/#\n    mode: direct\n"), 0o644)
	brokertest.Eventually(t, 10*time.Second, func() bool {
		code, _, _ := runCLI(t, "policy", "set", "--admin", admin, "-f", rules)
		return code == 0
	}, "policy set succeeds")
	code, backup, errOut := runCLI(t, "policy", "get", "--admin", admin)
	if code != 0 {
		t.Fatalf("policy get: %d %q", code, errOut)
	}
	saved := filepath.Join(dir, "backup.yaml")
	os.WriteFile(saved, []byte(backup), 0o644)
	code, out, errOut := runCLI(t, "policy", "set", "--admin", admin, "-f", saved)
	if code != 0 || !strings.Contains(out, "1 rules") {
		t.Fatalf("restoring %q: %d %q %q", backup, code, out, errOut)
	}
}
