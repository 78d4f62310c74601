package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/tlstest"
)

func tcpAddr(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }

func TestIPLimiterMaxConnsPerAddress(t *testing.T) {
	var hits []string
	l := NewIPLimiter(IPLimits{MaxConns: 2, Loopback: true}, clock.Real{}, func(h string) { hits = append(hits, h) })
	k1, ok1, _ := l.admit(tcpAddr("10.0.0.1", 1))
	_, ok2, _ := l.admit(tcpAddr("10.0.0.1", 2))
	_, ok3, _ := l.admit(tcpAddr("10.0.0.1", 3))
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("admitted %v %v %v, want the third refused", ok1, ok2, ok3)
	}
	if _, ok, _ := l.admit(tcpAddr("10.0.0.2", 1)); !ok {
		t.Fatal("another address was refused")
	}
	l.release(k1)
	if _, ok, _ := l.admit(tcpAddr("10.0.0.1", 4)); !ok {
		t.Fatal("a freed slot was not reusable")
	}
	if len(hits) != 1 || hits[0] != HitMaxConns {
		t.Fatalf("hits %v", hits)
	}
	// IPv6 addresses are counted per /64; IPv4-mapped ones as IPv4.
	_, a, _ := l.admit(tcpAddr("2001:db8:1:2::1", 1))
	_, b, _ := l.admit(tcpAddr("2001:db8:1:2:ffff::9", 1))
	_, c, _ := l.admit(tcpAddr("2001:db8:1:2::7", 1))
	_, d, _ := l.admit(tcpAddr("2001:db8:1:3::1", 1))
	if !a || !b || c || !d {
		t.Fatalf("IPv6 /64 counting: %v %v %v %v", a, b, c, d)
	}
	if _, ok, _ := l.admit(tcpAddr("::ffff:10.0.0.1", 9)); ok {
		t.Fatal("an IPv4-mapped address escaped its IPv4 count")
	}
}

func TestIPLimiterConnectRate(t *testing.T) {
	clk := clocktest.New(time.Unix(1000, 0))
	l := NewIPLimiter(IPLimits{ConnectRate: 3, Loopback: true}, clk, nil)
	var rated []bool
	for i := 0; i < 5; i++ {
		_, ok, rate := l.admit(tcpAddr("10.0.0.1", i))
		if !ok {
			t.Fatal("refused at accept: the rate limit marks, it does not close")
		}
		rated = append(rated, rate)
	}
	if want := []bool{false, false, false, true, true}; !equal(rated, want) {
		t.Fatalf("rate exceeded %v, want %v", rated, want)
	}
	if _, _, rate := l.admit(tcpAddr("10.0.0.2", 1)); rate {
		t.Fatal("another address was rate limited")
	}
	clk.Advance(time.Second/3 + time.Millisecond)
	if _, _, rate := l.admit(tcpAddr("10.0.0.1", 9)); rate {
		t.Fatal("a token did not come back after 1/rate")
	}
	if _, _, rate := l.admit(tcpAddr("10.0.0.1", 10)); !rate {
		t.Fatal("more than one token came back")
	}
}

// TestIPLimiterForgetsIdleAddresses: the table holds addresses with open
// connections or a bucket still refilling, not every address ever seen.
func TestIPLimiterForgetsIdleAddresses(t *testing.T) {
	clk := clocktest.New(time.Unix(1000, 0))
	l := NewIPLimiter(IPLimits{MaxConns: 5, ConnectRate: 10, Loopback: true}, clk, nil)
	for i := 0; i < 5000; i++ {
		k, _, _ := l.admit(tcpAddr(net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).String(), 1))
		l.release(k)
		if i%100 == 99 {
			clk.Advance(time.Second)
		}
	}
	if n := l.Tracked(); n > 2048 {
		t.Fatalf("%d addresses tracked after 5000 short connections", n)
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLimiterOnListeners: a listener with a limiter closes connections over
// the per-address limit at once and marks those over the rate; slots free
// when the handler closes its connection.
func TestLimiterOnListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	marks := make(chan bool, 10)
	h := HandlerFunc(func(c net.Conn) {
		defer c.Close()
		rc, _ := c.(interface{ ConnectRateExceeded() bool })
		marks <- rc != nil && rc.ConnectRateExceeded()
		_, _ = io.Copy(io.Discard, c)
	})
	lim := NewIPLimiter(IPLimits{MaxConns: 1, ConnectRate: 1, Loopback: true}, clocktest.New(time.Now()), nil) // time stands still
	s := ServeTCP(ln, h, slog.New(slog.DiscardHandler), Options{Limiter: lim})
	defer s.Close()
	a, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if <-marks {
		t.Fatal("the first connection was marked over the rate")
	}
	b, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("the second connection from the address was not closed: %v", err)
	}
	a.Close()
	// The slot frees when the handler closes; the next connection is over
	// the rate (one per second) and is handed over marked.
	var c net.Conn
	for {
		c, err = net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-marks:
			if !m {
				t.Fatal("a connection with no token left was not marked")
			}
			c.Close()
			return
		case <-time.After(100 * time.Millisecond):
			c.Close() // refused because the first slot was not freed yet: try again
		}
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "broken pipe"))
}

func TestCertificatesErrorsNameTheFile(t *testing.T) {
	ca := tlstest.NewCA(t, "test")
	srv := ca.Server("server")
	other := ca.Server("other")
	garbage := t.TempDir() + "/garbage.pem"
	_ = os.WriteFile(garbage, []byte("not pem"), 0o600)
	expired := ca.Issue("expired", tlstest.Options{CommonName: "x", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	for name, c := range map[string]struct {
		f    TLSFiles
		want string
	}{
		"missing cert":   {TLSFiles{Cert: "/nonexistent/cert.pem", Key: srv.KeyFile}, "/nonexistent/cert.pem"},
		"missing key":    {TLSFiles{Cert: srv.CertFile, Key: "/nonexistent/key.pem"}, "/nonexistent/key.pem"},
		"key of another": {TLSFiles{Cert: srv.CertFile, Key: other.KeyFile}, srv.CertFile},
		"garbage cert":   {TLSFiles{Cert: garbage, Key: srv.KeyFile}, garbage},
		"garbage CA":     {TLSFiles{Cert: srv.CertFile, Key: srv.KeyFile, CA: garbage}, garbage},
		"missing CA":     {TLSFiles{Cert: srv.CertFile, Key: srv.KeyFile, CA: "/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
		"expired":        {TLSFiles{Cert: expired.CertFile, Key: expired.KeyFile}, "not now"},
	} {
		_, err := LoadCertificates(c.f, clock.Real{})
		if !errors.Is(err, ErrTLSFiles) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v does not name %s", name, err, c.want)
		}
	}
	if _, err := LoadCertificates(TLSFiles{Cert: srv.CertFile, Key: srv.KeyFile, CA: ca.CertFile}, clock.Real{}); err != nil {
		t.Fatal(err)
	}
}

// TestTLSListenersAndReload: TCP and WebSocket listeners serve TLS 1.2+
// only; after Reload new handshakes get the new certificate while an
// established connection carries on.
func TestTLSListenersAndReload(t *testing.T) {
	ca1, ca2 := tlstest.NewCA(t, "one"), tlstest.NewCA(t, "two")
	s1, s2 := ca1.Server("s1"), ca2.Server("s2")
	dir := t.TempDir()
	certFile, keyFile := dir+"/cert.pem", dir+"/key.pem"
	cp := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cp(s1.CertFile, certFile)
	cp(s1.KeyFile, keyFile)
	certs, err := LoadCertificates(TLSFiles{Cert: certFile, Key: keyFile}, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s := ServeTCP(ln, echo(), slog.New(slog.DiscardHandler), Options{TLS: certs.MQTTConfig()})
	defer s.Close()
	wln, _ := net.Listen("tcp", "127.0.0.1:0")
	ws := ServeWebSocket(wln, echo(), slog.New(slog.DiscardHandler), Options{TLS: certs.MQTTConfig()})
	defer ws.Close()

	old, err := tls.Dial("tcp", s.Addr().String(), ca1.ClientConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	roundTrip(t, old)

	tls11 := ca1.ClientConfig(nil)
	tls11.MinVersion, tls11.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if c, err := tls.Dial("tcp", s.Addr().String(), tls11); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wsDial := func(ca *tlstest.CA) error {
		wc, _, err := websocket.Dial(ctx, "wss://"+ws.Addr().String()+"/mqtt", &websocket.DialOptions{
			HTTPClient: wsHTTPClient(ca.ClientConfig(nil)), Subprotocols: []string{"mqtt"},
		})
		if err == nil {
			wc.CloseNow()
		}
		return err
	}
	if err := wsDial(ca1); err != nil {
		t.Fatalf("wss: %v", err)
	}

	cp(s2.CertFile, certFile)
	cp(s2.KeyFile, keyFile)
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	if c, err := tls.Dial("tcp", s.Addr().String(), ca1.ClientConfig(nil)); err == nil {
		c.Close()
		t.Fatal("the old certificate is still served after Reload")
	}
	nc, err := tls.Dial("tcp", s.Addr().String(), ca2.ClientConfig(nil))
	if err != nil {
		t.Fatalf("new certificate: %v", err)
	}
	nc.Close()
	if err := wsDial(ca2); err != nil {
		t.Fatalf("wss after reload: %v", err)
	}
	roundTrip(t, old) // the connection made before the reload is untouched

	_ = os.WriteFile(keyFile, []byte("broken"), 0o600)
	if err := certs.Reload(); err == nil {
		t.Fatal("a broken key reloaded")
	}
	nc, err = tls.Dial("tcp", s.Addr().String(), ca2.ClientConfig(nil))
	if err != nil {
		t.Fatalf("a failed reload dropped the working certificate: %v", err)
	}
	nc.Close()
}

func roundTrip(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
}

func wsHTTPClient(cfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// TestLoopbackIsTrustedByDefault: without Loopback, the node's own host is
// not counted against the per-address limits.
func TestLoopbackIsTrustedByDefault(t *testing.T) {
	l := NewIPLimiter(IPLimits{MaxConns: 1, ConnectRate: 1}, clocktest.New(time.Now()), nil)
	for i := 0; i < 5; i++ {
		if _, ok, rate := l.admit(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1000 + i}); !ok || rate {
			t.Fatalf("loopback connection %d refused", i)
		}
	}
	if _, ok, _ := l.admit(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}); !ok {
		t.Fatal("first remote connection refused")
	}
	if _, ok, _ := l.admit(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 2}); ok {
		t.Fatal("remote connection over the limit admitted")
	}
}
