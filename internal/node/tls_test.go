package node_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/tlstest"
)

// tlsConfig is a test node config with MQTT over TLS and secure WebSocket
// on ephemeral ports, serving srv.
func tlsConfig(t *testing.T, srv *tlstest.Leaf) config.Config {
	cfg := brokertest.Config(t)
	cfg.MQTTSAddr, cfg.WSSAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.TLSCert, cfg.TLSKey = srv.CertFile, srv.KeyFile
	return cfg
}

func rawTLS(t *testing.T, n *brokertest.Node, cfg *tls.Config, v packet.Version) *brokertest.Raw {
	t.Helper()
	c, err := dialTLS(t, n.Addr("mqtts"), cfg)
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	return brokertest.NewRaw(t, c, v)
}

// TestTLSListeners: MQTT over TLS (paho v5, paho 3.1.1) and over secure
// WebSocket reach the same broker as plain TCP clients; TLS below 1.2 is
// refused.
func TestTLSListeners(t *testing.T) {
	ca := tlstest.NewCA(t, "test")
	n := brokertest.Start(t, tlsConfig(t, ca.Server("server")))
	if n.Addr("mqtts") == "" || n.Addr("wss") == "" {
		t.Fatal("no TLS listener addresses")
	}
	plain := connectOK(t, n.Raw(packet.V5), login(packet.V5, "plain", "", ""))
	plain.Subscribe(1, sub("secure/#", 1))

	c, err := dialTLS(t, n.Addr("mqtts"), ca.ClientConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	v5, err := brokertest.TryConnectV5To(t, c, &paho.Connect{ClientID: "tls5", CleanStart: true, KeepAlive: 30}, nil)
	if err != nil {
		t.Fatalf("paho v5 over TLS: %v", err)
	}
	v5.Sub("to/tls5", 1)
	v5.Pub("secure/v5", 1, false, "over tls")
	m := plain.ExpectPublish("secure/v5", "over tls")
	plain.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	plain.Send(pub("to/tls5", 1, 2, "to tls"))
	plain.ExpectAck(packet.PUBACK, 2)
	if m := v5.Next(); string(m.Payload) != "to tls" {
		t.Fatalf("v5 over TLS got %s", brokertest.String(m))
	}

	v3 := brokertest.ConnectV3To(t, "ssl://"+n.Addr("mqtts"), "tls3", true, func(o *pahov3.ClientOptions) {
		o.SetTLSConfig(ca.ClientConfig(nil))
	})
	brokertest.Wait(t, v3.Publish("secure/v3", 1, false, "3.1.1 over tls"), "3.1.1 publish over TLS")
	m = plain.ExpectPublish("secure/v3", "3.1.1 over tls")
	plain.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc, _, err := websocket.Dial(ctx, "wss://"+n.Addr("wss")+"/mqtt", &websocket.DialOptions{
		Subprotocols: []string{"mqtt"}, HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(nil)}},
	})
	if err != nil {
		t.Fatalf("wss dial: %v", err)
	}
	nc := packets.NewThreadSafeConn(websocket.NetConn(context.Background(), wc, websocket.MessageBinary))
	t.Cleanup(func() { nc.Close() })
	ws, err := brokertest.TryConnectV5To(t, nc, &paho.Connect{ClientID: "wss5", CleanStart: true, KeepAlive: 30}, nil)
	if err != nil {
		t.Fatalf("paho v5 over wss: %v", err)
	}
	ws.Pub("secure/wss", 1, false, "over wss")
	m = plain.ExpectPublish("secure/wss", "over wss")
	plain.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})

	old := ca.ClientConfig(nil)
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := dialTLS(t, n.Addr("mqtts"), old); err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
	// Plain MQTT bytes on the TLS port get nowhere.
	r := brokertest.NewRaw(t, dialFrom(t, "127.0.0.1", n.Addr("mqtts")), packet.V5)
	r.Send(login(packet.V5, "confused", "", ""))
	r.ExpectClosedSilently()
}

// TestMutualTLS: with client certificates required and identities taken
// from their common name, a client without a certificate or with one from
// another CA gets no connection; a client with a good certificate is its
// common name (no password) and gets that user's ACL rights; a user name
// that contradicts the certificate is refused. Plain-TCP clients, which
// have no certificate, are anonymous and refused.
func TestMutualTLS(t *testing.T) {
	ca, rogue := tlstest.NewCA(t, "fleet"), tlstest.NewCA(t, "rogue")
	cfg := tlsConfig(t, ca.Server("server"))
	cfg.TLSCA, cfg.TLSClientAuth, cfg.TLSIdentity = ca.CertFile, "require", "cn"
	cfg.AllowAnonymous = "false"
	cfg.AuthFailDelay = 0
	cfg.ACLFile = writeFile(t, "acl.yaml", "authenticated:\n  - {allow: both, topic: devices/%u/#}\n")
	n := brokertest.Start(t, cfg)

	drone := ca.Client("drone-7", tlstest.Options{})
	d := connectOK(t, rawTLS(t, n, ca.ClientConfig(drone), packet.V5), login(packet.V5, "d7", "", ""))
	d.Send(pub("devices/drone-7/pos", 1, 1, "ok"))
	if got := d.ExpectAck(packet.PUBACK, 1).ReasonCode; got.IsError() {
		t.Fatalf("own topic: %v", got)
	}
	d.Send(pub("devices/drone-8/pos", 1, 2, "not mine"))
	if got := d.ExpectAck(packet.PUBACK, 2).ReasonCode; got != packet.NotAuthorized {
		t.Fatalf("other drone's topic: %v", got)
	}

	if got := refused(t, rawTLS(t, n, ca.ClientConfig(drone), packet.V5), login(packet.V5, "d7b", "admin", "x")); got != packet.BadUserNameOrPassword {
		t.Fatalf("user name contradicting the certificate: %v", got)
	}
	for name, cc := range map[string]*tls.Config{
		"no certificate":            ca.ClientConfig(nil),
		"certificate of another CA": ca.ClientConfig(rogue.Client("drone-7", tlstest.Options{})),
	} {
		c, err := dialTLS(t, n.Addr("mqtts"), cc)
		if err != nil {
			continue // refused in the handshake (TLS 1.2 reports it here)
		}
		// TLS 1.3 clients learn of the refusal on their first read.
		r := brokertest.NewRaw(t, c, packet.V5)
		_ = r.SendBytes(mustEncode(t, login(packet.V5, "x", "", "")))
		if got := r.Closed(); len(got) != 0 {
			t.Fatalf("%s: got %s", name, packet.Describe(got[0]))
		}
	}
	if got := refused(t, n.Raw(packet.V5), login(packet.V5, "plain", "", "")); got != packet.NotAuthorized {
		t.Fatalf("plain TCP without identity: %v", got)
	}
}

func mustEncode(t *testing.T, p packet.Packet) []byte {
	t.Helper()
	b, err := p.Append(nil, packet.V5)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadKeepsConnections: Reload swaps the server certificate and the
// password file without dropping connections: a client connected before
// keeps exchanging messages, new handshakes get the new certificate, a
// user added to the file can connect, and a reload with a broken file
// keeps what worked.
func TestReloadKeepsConnections(t *testing.T) {
	ca1, ca2 := tlstest.NewCA(t, "one"), tlstest.NewCA(t, "two")
	dir := t.TempDir()
	cert, key, pw := dir+"/cert.pem", dir+"/key.pem", dir+"/passwd"
	s1 := ca1.Server("s1")
	copyFile(t, s1.CertFile, cert)
	copyFile(t, s1.KeyFile, key)
	if err := os.WriteFile(pw, []byte(passwords(t, "alice", "a")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := brokertest.Config(t)
	cfg.MQTTSAddr, cfg.TLSCert, cfg.TLSKey = "127.0.0.1:0", cert, key
	cfg.PasswordFile, cfg.AllowAnonymous, cfg.AuthFailDelay = pw, "false", 0
	n := brokertest.Start(t, cfg)

	before := connectOK(t, rawTLS(t, n, ca1.ClientConfig(nil), packet.V5), login(packet.V5, "before", "alice", "a"))
	before.Subscribe(1, sub("news", 0))

	s2 := ca2.Server("s2")
	copyFile(t, s2.CertFile, cert)
	copyFile(t, s2.KeyFile, key)
	if err := os.WriteFile(pw, []byte(passwords(t, "alice", "a", "bob", "b")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialTLS(t, n.Addr("mqtts"), ca1.ClientConfig(nil)); err == nil {
		t.Fatal("the old certificate is still served")
	}
	after := connectOK(t, rawTLS(t, n, ca2.ClientConfig(nil), packet.V5), login(packet.V5, "after", "bob", "b"))
	after.Send(pub("news", 1, 1, "after the reload"))
	after.ExpectAck(packet.PUBACK, 1)
	before.ExpectPublish("news", "after the reload")

	if err := os.WriteFile(key, []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte("not a password file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(); err == nil {
		t.Fatal("a reload with broken files succeeded")
	}
	connectOK(t, rawTLS(t, n, ca2.ClientConfig(nil), packet.V5), login(packet.V5, "still", "bob", "b"))
}
