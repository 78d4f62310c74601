package session_test

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
)

// panicHub attaches every client to a fresh session and panics on publish.
type panicHub struct{ env *session.Env }

func (h *panicHub) Attach(c *session.Conn, p *packet.Connect) (*session.Session, bool, packet.ReasonCode, string) {
	s := session.New(p.ClientID, h.env, p.Version, 0)
	s.Bind(c)
	return s, false, packet.Success, ""
}
func (h *panicHub) Publish(*session.Session, *message.Message, session.Acker) {
	panic("bug in publish")
}
func (h *panicHub) Subscribe(_ *session.Session, r []session.SubRequest, done func([]packet.ReasonCode)) {
	done(make([]packet.ReasonCode, len(r)))
}
func (h *panicHub) Unsubscribe(_ *session.Session, f []string, done func([]packet.ReasonCode)) {
	done(make([]packet.ReasonCode, len(f)))
}
func (h *panicHub) Detach(*session.Session, *session.Conn, bool) {}

func write(t *testing.T, c net.Conn, p packet.Packet) {
	t.Helper()
	b, err := p.Append(nil, packet.V5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestPanicInHandlerIsRecoveredAndCounted checks that a panic in one
// connection's code ends that connection only, is counted, and that
// another connection served by the same code keeps working.
func TestPanicInHandlerIsRecoveredAndCounted(t *testing.T) {
	m := metrics.NewNode()
	env := &session.Env{Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler), Metrics: m, Limits: session.Limits{
		MaxPacketSize: 1 << 20, ReceiveMaximum: 10, MaxInflight: 10, MaxQueued: 10, MaxStored: 10,
		MaxTopicLength: 100, MaxTopicLevels: 10, MaxClientIDLength: 100,
		ConnectTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, SlowConsumer: time.Second,
	}}
	env.Hub = &panicHub{env: env}

	connect := func(id string) (net.Conn, *packet.Reader) {
		server, client := net.Pipe()
		go session.Serve(server, env, nil)
		write(t, client, &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true, ClientID: id})
		r := packet.NewReader(client, 0)
		r.SetVersion(packet.V5)
		p, err := r.Next()
		if err != nil || p.Type() != packet.CONNACK {
			t.Fatalf("connect %s: %v %v", id, p, err)
		}
		return client, r
	}
	bad, badR := connect("bad")
	good, goodR := connect("good")

	write(t, bad, &packet.Publish{Topic: "t", Payload: []byte("x")})
	// The panicking connection is closed, without a DISCONNECT it could not vouch for.
	for {
		if _, err := badR.Next(); err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Logf("bad connection ended with %v", err)
			}
			break
		}
	}
	if got := testutil.ToFloat64(m.Panics); got != 1 {
		t.Fatalf("sextant_panics_total = %v, want 1", got)
	}
	write(t, good, &packet.Pingreq{})
	if p, err := goodR.Next(); err != nil || p.Type() != packet.PINGRESP {
		t.Fatalf("other connection after the panic: %v %v", p, err)
	}
	good.Close()
}
