package node_test

import (
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestPasswordAuthentication: with a password file and anonymous access
// off, the right password connects; a wrong password, an unknown user and
// a user name without password get 0x86 (3.1.1: return code 4); no
// credentials get 0x87 (3.1.1: 5). Refused connections are closed, and
// counted by reason.
func TestPasswordAuthentication(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.PasswordFile = writeFile(t, "passwd", passwords(t, "alice", "wonderland", "bob", "builder"))
	cfg.AllowAnonymous = "false"
	cfg.AuthFailDelay = 0
	n := brokertest.Start(t, cfg)

	a := connectOK(t, n.Raw(packet.V5), login(packet.V5, "a", "alice", "wonderland"))
	b := connectOK(t, n.Raw(packet.V311), login(packet.V311, "b", "bob", "builder"))
	a.Subscribe(1, sub("x", 1))
	b.Send(pub("x", 1, 1, "from bob"))
	b.ExpectAck(packet.PUBACK, 1)
	a.ExpectPublish("x", "from bob")

	for _, c := range []struct {
		name string
		cp   *packet.Connect
		want packet.ReasonCode
	}{
		{"wrong password", login(packet.V5, "c1", "alice", "builder"), packet.BadUserNameOrPassword},
		{"unknown user", login(packet.V5, "c2", "mallory", "wonderland"), packet.BadUserNameOrPassword},
		{"no password", login(packet.V5, "c3", "alice", ""), packet.BadUserNameOrPassword},
		{"anonymous", login(packet.V5, "c4", "", ""), packet.NotAuthorized},
		{"3.1.1 wrong password", login(packet.V311, "c5", "bob", "wonderland"), packet.BadUserNameOrPassword},
		{"3.1.1 unknown user", login(packet.V311, "c6", "mallory", "x"), packet.BadUserNameOrPassword},
		{"3.1.1 anonymous", login(packet.V311, "c7", "", ""), packet.NotAuthorized},
	} {
		if got := refused(t, n.Raw(c.cp.Version), c.cp); got != c.want {
			t.Errorf("%s: CONNACK %v, want %v", c.name, got, c.want)
		}
	}
	m := n.Metrics().ConnectionsRefused
	if got := brokertest.Value(m.WithLabelValues(packet.BadUserNameOrPassword.String())); got != 5 {
		t.Errorf("refusals for bad credentials counted %v, want 5", got)
	}
	if got := brokertest.Value(m.WithLabelValues(packet.NotAuthorized.String())); got != 2 {
		t.Errorf("refusals of anonymous clients counted %v, want 2", got)
	}
	// The refusals did not disturb the clients already connected.
	a.Send(pub("x", 0, 0, "still here"))
	a.ExpectPublish("x", "still here")
}

// TestFailedAuthenticationDelay: the refusal of a failed authentication is
// held back by auth-fail-delay (on the node's clock), while other clients
// connect and exchange messages meanwhile.
func TestFailedAuthenticationDelay(t *testing.T) {
	clk := clocktest.New(time.Now())
	cfg := brokertest.Config(t)
	cfg.PasswordFile = writeFile(t, "passwd", passwords(t, "alice", "wonderland"))
	cfg.AllowAnonymous = "false"
	cfg.AuthFailDelay = 2 * time.Second
	n := brokertest.StartClock(t, cfg, clk)

	bad := n.Raw(packet.V5)
	bad.Send(login(packet.V5, "guess", "alice", "password1"))

	good := connectOK(t, n.Raw(packet.V5), login(packet.V5, "good", "alice", "wonderland"))
	good.Subscribe(1, sub("t", 0))
	good.Send(pub("t", 0, 0, "meanwhile"))
	good.ExpectPublish("t", "meanwhile")

	if p := bad.RecvWithin(100 * time.Millisecond); p != nil {
		t.Fatalf("refusal sent before the delay: %s", packet.Describe(p))
	}
	var advanced time.Duration
	for {
		clk.Advance(250 * time.Millisecond)
		advanced += 250 * time.Millisecond
		if p := bad.RecvWithin(50 * time.Millisecond); p != nil {
			if ack, ok := p.(*packet.Connack); !ok || ack.ReasonCode != packet.BadUserNameOrPassword {
				t.Fatalf("got %s", packet.Describe(p))
			}
			break
		}
		if advanced > 10*time.Second {
			t.Fatal("no refusal after 10s of node time")
		}
	}
	if advanced < cfg.AuthFailDelay {
		t.Fatalf("refused after %v of node time, before the %v delay", advanced, cfg.AuthFailDelay)
	}
	bad.ExpectClosedSilently()
}

// TestEnhancedAuthenticationNotSupported: an MQTT 5 CONNECT with an
// Authentication Method is refused cleanly with 0x8C.
func TestEnhancedAuthenticationNotSupported(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	cp := login(packet.V5, "scram", "", "")
	cp.Props.SetAuthMethod("SCRAM-SHA-256")
	cp.Props.SetAuthData([]byte("client-first"))
	if got := refused(t, n.Raw(packet.V5), cp); got != packet.BadAuthenticationMethod {
		t.Fatalf("CONNACK %v, want 0x8C", got)
	}
}

// TestAnonymousByDefaultOnLoopback: a node whose listeners are all on
// loopback accepts anonymous clients by default (allow-anonymous auto; the
// refusal with allow-anonymous false is in TestPasswordAuthentication).
func TestAnonymousByDefaultOnLoopback(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	connectOK(t, n.Raw(packet.V5), login(packet.V5, "anon", "", ""))
	// A user name is accepted as anonymous when there is no password file
	// to check it against.
	connectOK(t, n.Raw(packet.V5), login(packet.V5, "named", "someone", "whatever"))
}

// TestClientIDTakeoverAcrossUsers: a client identifier in use by one user
// cannot be taken over by another (0x87) while the node remembers the
// owner; the owner's connection is undisturbed, and the same user may take
// its own session over.
func TestClientIDTakeoverAcrossUsers(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.PasswordFile = writeFile(t, "passwd", passwords(t, "alice", "a", "bob", "b"))
	cfg.AuthFailDelay = 0
	n := brokertest.Start(t, cfg)
	a := connectOK(t, n.Raw(packet.V5), login(packet.V5, "dev-1", "alice", "a"))
	if got := refused(t, n.Raw(packet.V5), login(packet.V5, "dev-1", "bob", "b")); got != packet.NotAuthorized {
		t.Fatalf("bob taking alice's client id: %v", got)
	}
	if got := refused(t, n.Raw(packet.V5), login(packet.V5, "dev-1", "", "")); got != packet.NotAuthorized {
		t.Fatalf("an anonymous client taking alice's client id: %v", got)
	}
	if got := a.Ping(); len(got) != 0 {
		t.Fatalf("alice got %s", packet.Describe(got[0]))
	}
	connectOK(t, n.Raw(packet.V5), login(packet.V5, "dev-1", "alice", "a"))
	a.ExpectDisconnect(packet.SessionTakenOver)
}
