package peer

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/tlstest"
)

// handshake runs a TLS handshake between a client and a server
// configuration over loopback TCP and returns the first error of either.
func handshake(t *testing.T, client, server *tls.Config) error {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = a.SetDeadline(deadline)
	_ = b.SetDeadline(deadline)
	srvErr := make(chan error, 1)
	go func() {
		s := tls.Server(b, server)
		err := s.Handshake()
		if err != nil {
			_ = b.Close() // unblock the client
		}
		srvErr <- err
	}()
	err = tls.Client(a, client).Handshake()
	if err != nil {
		_ = a.Close()
	}
	if serr := <-srvErr; err == nil {
		err = serr
	}
	return err
}

// copyFile replaces dst with src's content, as an operator rotating a file.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClusterTLSReload: a node's certificate and CA files are swapped in
// by Reload for new handshakes; a reload that fails keeps the previous ones.
func TestClusterTLSReload(t *testing.T) {
	oldCA, newCA := tlstest.NewCA(t, "old"), tlstest.NewCA(t, "new")
	dir := t.TempDir()
	// Node b's files, at fixed paths an operator overwrites.
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "b.pem"), filepath.Join(dir, "b-key.pem")
	leafB := oldCA.Client("b", tlstest.Options{})
	copyFile(t, oldCA.CertFile, caFile)
	copyFile(t, leafB.CertFile, certFile)
	copyFile(t, leafB.KeyFile, keyFile)
	b, err := LoadTLS(caFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	aOld := TLSConfig(oldCA.Pool(), oldCA.Client("a", tlstest.Options{}).Pair)
	aNew := TLSConfig(newCA.Pool(), newCA.Client("a2", tlstest.Options{}).Pair)
	if err := handshake(t, aOld, b.Config()); err != nil {
		t.Fatalf("before rotation: %v", err)
	}
	if err := handshake(t, aNew, b.Config()); err == nil {
		t.Fatal("a node of the new CA was accepted before b rotated")
	}

	// A broken key file: the reload fails and b keeps its identity.
	copyFile(t, caFile, keyFile)
	if err := b.Reload(); err == nil {
		t.Fatal("a reload with a bad key succeeded")
	}
	if err := handshake(t, aOld, b.Config()); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}

	// Rotate b to the new CA: the same Config value follows.
	leafB2 := newCA.Client("b", tlstest.Options{})
	copyFile(t, newCA.CertFile, caFile)
	copyFile(t, leafB2.CertFile, certFile)
	copyFile(t, leafB2.KeyFile, keyFile)
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	cfg := b.Config()
	if err := handshake(t, aNew, cfg); err != nil {
		t.Fatalf("after rotation, as server: %v", err)
	}
	if err := handshake(t, cfg, aNew); err != nil {
		t.Fatalf("after rotation, as client: %v", err)
	}
	if err := handshake(t, aOld, cfg); err == nil {
		t.Fatal("a node of the old CA was accepted after rotation")
	}
}
