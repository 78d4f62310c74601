package peer

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sextantmq/sextant/internal/memnet"
)

func TestRetainedSyncOnEveryConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond, BreakAfter: time.Second})
		defer nw.Close()
		ra := newRecorder("a")
		for i := range 5000 {
			ra.sync = append(ra.sync, []byte("r"+strconv.Itoa(i)))
		}
		a := startNode(t, nw, "a", "10.0.0.1", Options{BatchBytes: 4096}, ra)
		b := startNode(t, nw, "b", "10.0.0.2", Options{}, nil)
		a.mgr.Add("b", "10.0.0.2:7000")
		b.mgr.Add("a", "10.0.0.1:7000")
		count := func() int {
			_, r, _ := b.rec.snapshot()
			return len(r)
		}
		eventually(t, 10*time.Second, "first sync", func() bool { return count() == 5000 })
		if !a.mgr.Link("b").SendRetained([]byte("update")) {
			t.Fatal("retained update not queued on a connected link")
		}
		eventually(t, 10*time.Second, "update", func() bool { return count() == 5001 })
		_, got, _ := b.rec.snapshot()
		if !slices.Equal(got[:5000], stringsOf(ra.sync)) || got[5000] != "update" {
			t.Fatal("sync arrived out of order")
		}
		// A reconnection syncs everything again; an update while down is not
		// queued.
		nw.Partition("10.0.0.1", "10.0.0.2")
		eventually(t, 30*time.Second, "link down", func() bool { return !a.mgr.Link("b").Up() })
		if a.mgr.Link("b").SendRetained([]byte("lost")) {
			t.Fatal("retained update queued on a link that is down")
		}
		nw.Heal("10.0.0.1", "10.0.0.2")
		eventually(t, 30*time.Second, "second sync", func() bool { return count() == 10001 })
	})
}

func stringsOf(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// TestAcceptorTakesNewerConnection: the dialler restarts while the acceptor
// still holds the old connection (nothing told it the old one died); the
// acceptor switches to the new connection at once.
func TestAcceptorTakesNewerConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		_, b := pair(t, nw, Options{ReadTimeout: time.Hour, PingInterval: 30 * time.Minute})
		start := time.Now()
		// The old "a" goes silent (its host is cut off, so its connection
		// stalls rather than closing) and a new "a" starts elsewhere.
		nw.Isolate("10.0.0.1")
		a2 := startNode(t, nw, "a", "10.0.0.3", Options{}, newRecorder("a"))
		a2.mgr.AddInterest("new/#", 1)
		a2.mgr.Add("b", "10.0.0.2:7000")
		eventually(t, 5*time.Second, "new connection serves", func() bool {
			_, _, in := b.rec.snapshot()
			return in["a"]["new/#"]
		})
		if r := testutil.ToFloat64(b.mgr.metrics.reconnects.WithLabelValues("a")); r != 1 {
			t.Errorf("b counted %v reconnects, want 1", r)
		}
		if time.Since(start) >= 10*time.Second {
			t.Error("the old connection may have been reset by the network before it was replaced")
		}
	})
}

func TestHandshakeRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{})
		defer nw.Close()
		b := startNode(t, nw, "b", "10.0.0.2", Options{}, nil)
		b.mgr.Add("a", "10.0.0.1:7000")
		for name, h := range map[string]hello{
			"unknown node":     {Version: protocolVersion, From: "0", To: "b"},
			"wrong node":       {Version: protocolVersion, From: "a", To: "c"},
			"larger id dials":  {Version: protocolVersion, From: "c", To: "b"},
			"protocol version": {Version: protocolVersion + 1, From: "a", To: "b"},
		} {
			c, err := nw.Dial(context.Background(), "10.0.0.1", "10.0.0.2:7000")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte{Kind})
			_, _ = c.Write(appendHello(nil, h))
			typ, body, _, err := readFrame(bufio.NewReader(c), nil, 4096)
			if err != nil || typ != frameReject {
				t.Errorf("%s: got %s frame, %v; want a reject", name, frameName(typ), err)
			} else {
				reason, _ := decodeReject(body)
				t.Logf("%s: %s", name, reason)
			}
			if _, err := io.ReadAll(c); err != nil {
				t.Errorf("%s: connection not closed cleanly: %v", name, err)
			}
			_ = c.Close()
		}
		// Not the peer protocol at all.
		c, err := nw.Dial(context.Background(), "10.0.0.1", "10.0.0.2:7000")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		if n, _ := io.ReadAll(c); len(n) != 0 {
			t.Errorf("answered a stranger with %q", n)
		}
		_ = c.Close()
		if b.mgr.Link("a").Up() {
			t.Error("a refused connection brought the link up")
		}
	})
}

func TestBackoffIsBoundedAndSeeded(t *testing.T) {
	mk := func(seed uint64) *Manager {
		m, err := New(Config{NodeID: "a", Dial: func(context.Context, string) (net.Conn, error) { return nil, io.EOF },
			Handler: newRecorder("a"), Seed: seed, Options: Options{BackoffMin: 100 * time.Millisecond, BackoffMax: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := mk(3), mk(3)
	for n := 1; n <= 12; n++ {
		d := a.backoff(n)
		if d != b.backoff(n) {
			t.Fatalf("attempt %d: same seed, different backoff", n)
		}
		ceil := min(100*time.Millisecond<<(n-1), 2*time.Second)
		if d < ceil/2 || d > ceil {
			t.Fatalf("attempt %d: backoff %v outside [%v, %v]", n, d, ceil/2, ceil)
		}
	}
}

func TestMuxRoutesByFirstByte(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{})
		defer nw.Close()
		ln, err := nw.Listen("10.0.0.2:7000")
		if err != nil {
			t.Fatal(err)
		}
		mux := NewMux(ln, time.Second, nil)
		peers := mux.Listener(Kind)
		meta := mux.Listener('R', 'F')
		mux.Start()
		defer mux.Close()
		for _, tc := range []struct {
			first byte
			ln    net.Listener
		}{{Kind, peers}, {'R', meta}, {'F', meta}} {
			c, err := nw.Dial(context.Background(), "10.0.0.1", "10.0.0.2:7000")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte{tc.first, 'x', 'y'})
			s, err := tc.ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 3)
			if _, err := io.ReadFull(s, got); err != nil || string(got) != string([]byte{tc.first, 'x', 'y'}) {
				t.Fatalf("kind %q: read %q, %v", tc.first, got, err)
			}
			_ = s.Close()
			_ = c.Close()
		}
		// An unknown first byte, and a silent connection, are closed.
		c, _ := nw.Dial(context.Background(), "10.0.0.1", "10.0.0.2:7000")
		_, _ = c.Write([]byte{'Z'})
		if b, _ := io.ReadAll(c); len(b) != 0 {
			t.Fatalf("unknown kind answered %q", b)
		}
		c2, _ := nw.Dial(context.Background(), "10.0.0.1", "10.0.0.2:7000")
		start := time.Now()
		_, _ = io.ReadAll(c2)
		if time.Since(start) < time.Second {
			t.Fatal("silent connection closed before the sniff timeout")
		}
		_ = peers.Close()
		if _, err := peers.Accept(); err == nil {
			t.Fatal("Accept on a closed sub-listener succeeded")
		}
	})
}

// TestMutualTLS runs a link over TLS with certificates from one CA, and
// checks that a node with a certificate from another CA is refused.
func TestMutualTLS(t *testing.T) {
	ca, caKey := newCA(t, "cluster CA")
	other, otherKey := newCA(t, "stranger CA")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	good := TLSConfig(pool, leaf(t, ca, caKey, "a"))
	goodB := TLSConfig(pool, leaf(t, ca, caKey, "b"))
	bad := TLSConfig(pool, leaf(t, other, otherKey, "a"))

	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 2 * time.Millisecond})
		defer nw.Close()
		start := func(id, host string, cfg *tls.Config) *testNode {
			ln, err := nw.Listen(host + ":7000")
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(id)
			m, err := New(Config{NodeID: id, Listener: ln, Dial: nw.DialFrom(host), Handler: rec, TLS: cfg,
				Options: Options{BackoffMin: 100 * time.Millisecond, BackoffMax: 100 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			m.Start()
			t.Cleanup(func() { _ = m.Close() })
			return &testNode{id: id, mgr: m, rec: rec}
		}
		a := start("a", "10.0.0.1", good)
		b := start("b", "10.0.0.2", goodB)
		a.mgr.Add("b", "10.0.0.2:7000")
		b.mgr.Add("a", "10.0.0.1:7000")
		eventually(t, 5*time.Second, "TLS link up", func() bool { return a.mgr.Link("b").Up() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if got, err := a.mgr.Link("b").Call(ctx, 1, []byte("x")); err != nil || string(got) != "a:x" {
			t.Fatalf("call over TLS: %q %v", got, err)
		}

		s := start("0", "10.0.0.3", bad)
		s.mgr.Add("b", "10.0.0.2:7000")
		b.mgr.Add("0", "10.0.0.3:7000")
		time.Sleep(3 * time.Second) // lint:sleep-ok fake time: many dial attempts
		if s.mgr.Link("b").Up() || b.mgr.Link("0").Up() {
			t.Fatal("a certificate from another CA was accepted")
		}
	})
}

func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, node string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: node},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
