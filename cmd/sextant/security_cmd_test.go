package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/auth"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/tlstest"
)

func runCLIInput(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestPasswdCommand: sextant passwd creates the file (0600), adds and
// updates users with bcrypt hashes from stdin or --password (with a
// warning), removes users, and refuses bad input without touching the file.
func TestPasswdCommand(t *testing.T) {
	f := filepath.Join(t.TempDir(), "passwd")
	if code, out, errOut := runCLIInput(t, "wonderland\n", "passwd", "-f", f, "alice", "--cost", "4"); code != 0 || !strings.Contains(out, "added alice") {
		t.Fatalf("add: %d %q %q", code, out, errOut)
	}
	if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v %v", st.Mode(), err)
	}
	if code, _, errOut := runCLIInput(t, "builder\n", "passwd", "-f", f, "bob", "--cost", "4"); code != 0 {
		t.Fatalf("add bob: %q", errOut)
	}
	code, out, errOut := runCLIInput(t, "", "passwd", "-f", f, "alice", "--cost", "4", "--password", "looking-glass")
	if code != 0 || !strings.Contains(out, "updated alice") || !strings.Contains(errOut, "process list") {
		t.Fatalf("update with --password: %d %q %q", code, out, errOut)
	}
	p, err := auth.LoadPasswords(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Verify("alice", []byte("looking-glass")) != nil || p.Verify("bob", []byte("builder")) != nil || p.Verify("alice", []byte("wonderland")) == nil {
		t.Fatal("passwords not as set")
	}
	before, _ := os.ReadFile(f)
	for _, bad := range [][]string{
		{"passwd", "-f", f, "bad:name"},
		{"passwd", "-f", f, "carol", "--cost", "3"},
		{"passwd", "-f", f, "nobody", "--delete"},
	} {
		if code, _, errOut := runCLIInput(t, "pw\n", bad...); code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: code %d stderr %q (want one line, non-zero)", bad, code, errOut)
		}
	}
	if code, _, _ := runCLIInput(t, "", "passwd", "-f", f, "carol", "--cost", "4"); code == 0 {
		t.Error("an empty password was accepted")
	}
	if after, _ := os.ReadFile(f); !bytes.Equal(before, after) {
		t.Fatal("a refused command changed the file")
	}
	if code, out, _ := runCLIInput(t, "", "passwd", "-f", f, "bob", "--delete"); code != 0 || !strings.Contains(out, "removed bob") {
		t.Fatalf("delete: %d %q", code, out)
	}
	if p, _ := auth.LoadPasswords(f); len(p.Users()) != 1 {
		t.Fatalf("users after delete: %v", p.Users())
	}
}

// TestServeRefusesBadSecurityFiles: `sextant serve` does not start when a
// file it is given is missing or invalid, or when no client could
// authenticate, and says so in one line naming the file or setting.
func TestServeRefusesBadSecurityFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "test")
	srv := ca.Server("server")
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	_ = os.WriteFile(garbage, []byte("not what it should be\n"), 0o600)
	badACL := filepath.Join(dir, "acl.yaml")
	_ = os.WriteFile(badACL, []byte("anonymous:\n  - {allow: read, topic: x}\n"), 0o600)
	base := []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "", "--admin-addr", ""}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mqtts-addr", "127.0.0.1:0", "--tls-cert", "/nonexistent/cert.pem", "--tls-key", srv.KeyFile}, "/nonexistent/cert.pem"},
		{[]string{"--mqtts-addr", "127.0.0.1:0", "--tls-cert", srv.CertFile, "--tls-key", garbage}, srv.CertFile},
		{[]string{"--mqtts-addr", "127.0.0.1:0", "--tls-cert", srv.CertFile, "--tls-key", srv.KeyFile, "--tls-ca", garbage, "--tls-client-auth", "require"}, garbage},
		{[]string{"--mqtts-addr", "127.0.0.1:0"}, "tls-cert"},
		{[]string{"--password-file", "/nonexistent/passwd"}, "/nonexistent/passwd"},
		{[]string{"--password-file", garbage}, garbage},
		{[]string{"--acl-file", badACL}, badACL},
		{[]string{"--mqtt-addr", "0.0.0.0:0"}, "allow-anonymous"},
		{[]string{"--admin-addr", "0.0.0.0:0"}, "admin-token"},
		{[]string{"--admin-addr", "127.0.0.1:0", "--admin-token-file", "/nonexistent/token"}, "/nonexistent/token"},
	} {
		code, _, errOut := runCLI(t, append(append([]string{}, base...), c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: code %d stderr %q (want one line naming %s)", c.args, code, errOut, c.want)
		}
	}
}

// TestAdminAPIAuthentication: an admin API served over TLS with tokens:
// the CLI (--ca, --token) reads with the read token and is refused a change
// (403); without a token it gets 401; the admin token changes policies;
// /healthz answers without a token.
func TestAdminAPIAuthentication(t *testing.T) {
	const admin, read = "admin-secret-0123456789", "read-secret-0123456789"
	ca := tlstest.NewCA(t, "admin")
	srv := ca.Server("server")
	cfg := brokertest.Config(t)
	cfg.AdminTLS, cfg.TLSCert, cfg.TLSKey = true, srv.CertFile, srv.KeyFile
	cfg.AdminToken, cfg.AdminReadToken = admin, read
	n := brokertest.Start(t, cfg)
	addr := n.Addr("admin")

	if code, _, errOut := runCLI(t, "nodes", "--admin", addr, "--ca", ca.CertFile); code == 0 || !strings.Contains(errOut, "HTTP 401") {
		t.Fatalf("no token: %d %q", code, errOut)
	}
	if code, out, errOut := runCLI(t, "nodes", "--admin", addr, "--cafile", ca.CertFile, "--token", read); code != 0 || !strings.Contains(out, "NODE") {
		t.Fatalf("read token: %d %q %q", code, out, errOut)
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	_ = os.WriteFile(rules, []byte("rules:\n  - match: swarm/#\n    mode: direct\n"), 0o600)
	if code, _, errOut := runCLI(t, "policy", "set", "--admin", addr, "--ca", ca.CertFile, "--token", read, "-f", rules); code == 0 || !strings.Contains(errOut, "HTTP 403") {
		t.Fatalf("read token writing: %d %q", code, errOut)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool {
		code, _, _ := runCLI(t, "policy", "set", "--admin", addr, "--cafile", ca.CertFile, "--token", admin, "-f", rules)
		return code == 0
	}, "policy set with the admin token")
	if code, _, errOut := runCLI(t, "nodes", "--admin", addr, "--token", read); code == 0 {
		t.Fatalf("plain HTTP to a TLS admin API succeeded: %q", errOut)
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(nil)}, Timeout: 5 * time.Second}
	res, err := hc.Get("https://" + addr + "/healthz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("/healthz without a token: %v %v", res, err)
	}
	res.Body.Close()
	res, err = hc.Get("https://" + addr + "/metrics")
	if err != nil || res.StatusCode != 401 {
		t.Fatalf("/metrics without a token: %v %v", res, err)
	}
	res.Body.Close()
}
