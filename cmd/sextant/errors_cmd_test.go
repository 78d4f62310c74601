package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestConfigErrorsNameTheKey: a bad configuration file is refused with
// one line naming the file, the line, the key and the form its value must
// take; a wrong key gets the closest right one.
func TestConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		yaml string
		want []string
	}{
		{"mqtt_port: 1883\n", []string{"line 1", `unknown key "mqtt_port"`, "did you mean mqtt-addr?"}},
		{"max-connections: lots\n", []string{"line 1", "max-connections", `"lots" is not a whole number`}},
		{"max-keepalive: 70000\n", []string{"max-keepalive", "from 0 to 65535"}},
		{"connect-timeout: 10\n", []string{"connect-timeout", "a duration such as 10s"}},
		{"fsync: sometimes\n", []string{"fsync", `"sometimes" is not one of always, batch, never`}},
		{"fsync: [always]\n", []string{"fsync", "want a single value"}},
		{"- mqtt-addr\n", []string{"must be a mapping of key: value lines"}},
		{"fsync: always\nfsync: batch\n", []string{"line 2", "fsync is set twice"}},
	} {
		f := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(f, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, "serve", "--config", f, "--data-dir", filepath.Join(dir, "data"))
		if code == 0 || len(strings.Split(strings.TrimSpace(errOut), "\n")) != 1 {
			t.Errorf("%q: exit %d, stderr %q; want one line", c.yaml, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: stderr %q lacks %q", c.yaml, errOut, w)
			}
		}
		if strings.Contains(errOut, "config.Config") || strings.Contains(errOut, "!!") || strings.Contains(errOut, "invalid: invalid") {
			t.Errorf("%q: stderr %q speaks of Go or YAML internals", c.yaml, errOut)
		}
	}
	code, _, errOut := runCLI(t, "serve", "--data-dir", filepath.Join(dir, "data"), "--fsync", "batch", "--fsync-interval", "0s")
	if code == 0 || !strings.HasSuffix(errOut, ": fsync-interval: must be positive with fsync=batch\n") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("a bad combination of flags: %d %q", code, errOut)
	}
}

// TestDataDirHeldIsNamed: a second node on the data directory of a
// running one says the directory is in use.
func TestDataDirHeldIsNamed(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	code, _, errOut := runCLI(t, "serve", "--data-dir", n.Cfg.DataDir, "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "", "--admin-addr", "")
	if code == 0 || !strings.Contains(errOut, "another process") || !strings.Contains(errOut, "data-dir") {
		t.Fatalf("exit %d, stderr %q; want a message naming another process and the data-dir", code, errOut)
	}
}

// TestWrongPortIsNamed: a client command pointed at an admin (HTTP) port,
// and an admin command pointed at an MQTT port, say what they found there.
func TestWrongPortIsNamed(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	host, adminPort, _ := net.SplitHostPort(n.Addr("admin"))
	code, _, errOut := runCLI(t, "pub", "-h", host, "-p", adminPort, "-t", "x", "-m", "y", "--connect-timeout", "300ms")
	if code == 0 || !strings.Contains(errOut, "answers HTTP") || !strings.Contains(errOut, "mqtt-addr") {
		t.Errorf("pub at the admin port: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "nodes", "--admin", n.MQTT())
	if code == 0 || !strings.Contains(errOut, "answers MQTT") || !strings.Contains(errOut, "admin-addr") {
		t.Errorf("nodes at the MQTT port: %d %q", code, errOut)
	}
}
