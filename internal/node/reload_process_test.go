package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/tlstest"
)

// TestSIGHUPReloadsWithoutDroppingConnections runs the real binary: SIGHUP
// makes `sextant serve` load a new certificate and a password file with a
// new user, while a client connected over TLS before the signal keeps its
// connection and receives the new user's message; a SIGHUP with a broken
// key is reported and the working certificate kept.
func TestSIGHUPReloadsWithoutDroppingConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the sextant binary")
	}
	bin := brokertest.BuildSextant(t)
	dir := t.TempDir()
	cert, key, pw := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "passwd")
	ca1, ca2 := tlstest.NewCA(t, "one"), tlstest.NewCA(t, "two")
	s1, s2 := ca1.Server("s1"), ca2.Server("s2")
	copyFile(t, s1.CertFile, cert)
	copyFile(t, s1.KeyFile, key)
	if err := os.WriteFile(pw, []byte(passwords(t, "alice", "a")), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsAddr := brokertest.FreeAddr(t)
	p := brokertest.StartProcess(t, bin, brokertest.FreeAddr(t), "--data-dir", filepath.Join(dir, "data"),
		"--mqtts-addr", tlsAddr, "--tls-cert", cert, "--tls-key", key, "--password-file", pw,
		"--allow-anonymous", "false", "--auth-fail-delay", "0s", "--log-level", "info")
	dial := func(ca *tlstest.CA) (*brokertest.Raw, error) {
		c, err := dialTLS(t, tlsAddr, ca.ClientConfig(nil))
		if err != nil {
			return nil, err
		}
		return brokertest.NewRaw(t, c, packet.V5), nil
	}
	r, err := dial(ca1)
	if err != nil {
		t.Fatal(err)
	}
	alice := connectOK(t, r, login(packet.V5, "alice", "alice", "a"))
	alice.Subscribe(1, sub("news", 0))

	s2cert, _ := os.ReadFile(s2.CertFile)
	s2key, _ := os.ReadFile(s2.KeyFile)
	if err := os.WriteFile(pw, []byte(passwords(t, "alice", "a", "bob", "b")), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(cert, s2cert, 0o600)
	_ = os.WriteFile(key, s2key, 0o600)
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(p.Output(), "reloaded certificates")
	}, "the reload is logged")
	if _, err := dial(ca1); err == nil {
		t.Fatal("the old certificate is still served")
	}
	r, err = dial(ca2)
	if err != nil {
		t.Fatalf("new certificate: %v", err)
	}
	bob := connectOK(t, r, login(packet.V5, "bob", "bob", "b"))
	bob.Send(pub("news", 1, 1, "from bob"))
	bob.ExpectAck(packet.PUBACK, 1)
	alice.ExpectPublish("news", "from bob") // alice's connection survived

	_ = os.WriteFile(key, []byte("broken"), 0o600)
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(p.Output(), "reload: keeping the previous")
	}, "the failed reload is logged")
	r, err = dial(ca2)
	if err != nil {
		t.Fatalf("a failed reload dropped the working certificate: %v", err)
	}
	connectOK(t, r, login(packet.V5, "bob2", "bob", "b"))
	p.Stop()
}
