package node_test

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sextantmq/sextant/internal/auth"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// writeFile writes content to a file in a fresh temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// passwords renders a password file of user/password pairs at bcrypt's
// minimum cost (tests check behaviour, not the cost).
func passwords(t *testing.T, pairs ...string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		h, err := auth.HashPassword([]byte(pairs[i+1]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(pairs[i] + ":" + string(h) + "\n")
	}
	return b.String()
}

// login is a CONNECT with credentials (user "" : none).
func login(v packet.Version, id, user, password string) *packet.Connect {
	cp := &packet.Connect{ProtocolName: "MQTT", Version: v, ClientID: id, CleanStart: true, KeepAlive: 60}
	if user != "" {
		cp.UsernameFlag, cp.Username = true, user
	}
	if password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(password)
	}
	return cp
}

// connectOK connects a raw client and fails the test unless CONNACK is a
// success.
func connectOK(t *testing.T, r *brokertest.Raw, cp *packet.Connect) *brokertest.Raw {
	t.Helper()
	r.Send(cp)
	if ack := brokertest.Expect[*packet.Connack](r); ack.ReasonCode != packet.Success {
		t.Fatalf("%q as %q: %s", cp.ClientID, cp.Username, packet.Describe(ack))
	}
	return r
}

// refused connects a raw client and returns the refusal's reason code; the
// connection must then close.
func refused(t *testing.T, r *brokertest.Raw, cp *packet.Connect) packet.ReasonCode {
	t.Helper()
	r.Send(cp)
	ack := brokertest.Expect[*packet.Connack](r)
	if ack.ReasonCode == packet.Success {
		t.Fatalf("%q as %q was accepted", cp.ClientID, cp.Username)
	}
	r.ExpectClosedSilently()
	return ack.ReasonCode
}

// dialFrom opens a TCP connection to addr from the loopback address ip
// (127.0.0.2, ...): Linux routes all of 127/8 to lo, so tests can play
// clients at different addresses.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialTLS opens a TLS connection and completes the handshake.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func sub(filter string, qos byte) packet.Subscription {
	return packet.Subscription{Filter: filter, QoS: qos}
}

func pub(topic string, qos byte, pid uint16, payload string) *packet.Publish {
	return &packet.Publish{Topic: topic, QoS: qos, PacketID: pid, Payload: []byte(payload)}
}

// barrier makes sure everything routed to r before has arrived, and fails
// the test if anything did: r publishes a marker to its own topic (which
// the ACL must let it use) and waits for it.
func expectNothing(t *testing.T, r *brokertest.Raw, own, what string) {
	t.Helper()
	r.Subscribe(0xfff0, sub(own, 0))
	r.Send(pub(own, 0, 0, "barrier"))
	p := brokertest.Expect[*packet.Publish](r)
	if p.Topic != own {
		t.Fatalf("%s: got %s", what, packet.Describe(p))
	}
}
