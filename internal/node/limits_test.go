package node_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func limitsHit(n *brokertest.Node, limit string) float64 {
	return brokertest.Value(n.Metrics().LimitsHit.WithLabelValues(limit))
}

// bystanders connects a subscriber and a publisher from 127.0.0.1 and
// returns a check that a message still goes from one to the other.
func bystanders(t *testing.T, n *brokertest.Node) func(what string) {
	t.Helper()
	s := connectOK(t, brokertest.NewRaw(t, dialFrom(t, "127.0.0.1", n.MQTT()), packet.V5), login(packet.V5, "bystander-sub", "", ""))
	s.Subscribe(1, sub("bystanders", 1))
	p := connectOK(t, brokertest.NewRaw(t, dialFrom(t, "127.0.0.1", n.MQTT()), packet.V5), login(packet.V5, "bystander-pub", "", ""))
	var id uint16
	return func(what string) {
		t.Helper()
		id++
		msg := fmt.Sprint(what, " ", id)
		p.Send(pub("bystanders", 1, id, msg))
		if a := p.ExpectAck(packet.PUBACK, id); a.ReasonCode.IsError() {
			t.Fatalf("%s: bystander publish refused: %v", what, a.ReasonCode)
		}
		m := s.ExpectPublish("bystanders", msg)
		s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}
}

// TestConnectionsPerIPLimit: past max-connections-per-ip, connections from
// that address are closed as soon as they are accepted; other addresses
// are served; a closed connection frees its slot.
func TestConnectionsPerIPLimit(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxConnsPerIP, cfg.LimitLoopback = 3, true
	n := brokertest.Start(t, cfg)
	check := bystanders(t, n)
	var held []*brokertest.Raw
	for i := 0; i < 3; i++ {
		r := brokertest.NewRaw(t, dialFrom(t, "127.0.0.2", n.MQTT()), packet.V5)
		held = append(held, connectOK(t, r, login(packet.V5, fmt.Sprint("held-", i), "", "")))
	}
	over := brokertest.NewRaw(t, dialFrom(t, "127.0.0.2", n.MQTT()), packet.V5)
	_ = over.SendBytes(mustEncode(t, login(packet.V5, "over", "", "")))
	over.ExpectClosedSilently()
	if got := limitsHit(n, metrics.LimitConnsPerIP); got < 1 {
		t.Fatalf("limit hits %v", got)
	}
	check("while 127.0.0.2 is at its limit")

	held[0].Send(&packet.Disconnect{})
	held[0].Closed()
	brokertest.Eventually(t, 5*time.Second, func() bool {
		r := brokertest.NewRaw(t, dialFrom(t, "127.0.0.2", n.MQTT()), packet.V5)
		_ = r.SendBytes(mustEncode(t, login(packet.V5, "again", "", "")))
		p := r.TryRecv()
		r.Close()
		return p != nil
	}, "a freed slot is reusable")
}

// TestConnectRatePerIPLimit: past connect-rate-per-ip, CONNECT is refused
// with 0x9F (3.1.1: return code 3) until the address's bucket refills on
// the node's clock; other addresses are unaffected.
func TestConnectRatePerIPLimit(t *testing.T) {
	clk := clocktest.New(time.Now())
	cfg := brokertest.Config(t)
	cfg.ConnectRatePerIP, cfg.LimitLoopback = 2, true
	n := brokertest.StartClock(t, cfg, clk)
	from := func() *brokertest.Raw {
		return brokertest.NewRaw(t, dialFrom(t, "127.0.0.3", n.MQTT()), packet.V5)
	}
	connectOK(t, from(), login(packet.V5, "r1", "", ""))
	connectOK(t, from(), login(packet.V5, "r2", "", ""))
	if got := refused(t, from(), login(packet.V5, "r3", "", "")); got != packet.ConnectionRateExceeded {
		t.Fatalf("v5 over the rate: %v", got)
	}
	r := brokertest.NewRaw(t, dialFrom(t, "127.0.0.3", n.MQTT()), packet.V311)
	if got := refused(t, r, login(packet.V311, "r4", "", "")); got != packet.ServerUnavailable {
		t.Fatalf("3.1.1 over the rate: %v, want return code 3", got)
	}
	check := bystanders(t, n) // 127.0.0.1 has its own bucket
	check("while 127.0.0.3 is over its rate")
	clk.Advance(time.Second / 2)
	connectOK(t, from(), login(packet.V5, "r5", "", ""))
	if got := limitsHit(n, metrics.LimitConnectRate); got != 2 {
		t.Fatalf("rate limit hits %v, want 2", got)
	}
}

// TestPublishRateLimitPauses: a client over publish-rate is paused (its
// socket is not read) until it is back under the rate on the node's clock:
// its acknowledgements stop at the burst, and resume as time passes,
// while other clients carry on.
func TestPublishRateLimitPauses(t *testing.T) {
	clk := clocktest.New(time.Now())
	cfg := brokertest.Config(t)
	cfg.PublishRate, cfg.LimitLoopback = 10, true
	n := brokertest.StartClock(t, cfg, clk)
	check := bystanders(t, n)
	fast := connectOK(t, n.Raw(packet.V5), login(packet.V5, "fast", "", ""))
	for i := 1; i <= 30; i++ {
		fast.Send(pub("fast", 1, uint16(i), "x"))
	}
	for i := 1; i <= 10; i++ {
		fast.ExpectAck(packet.PUBACK, uint16(i))
	}
	if p := fast.RecvWithin(100 * time.Millisecond); p != nil {
		t.Fatalf("acknowledged past the burst without time passing: %s", packet.Describe(p))
	}
	check("while a publisher is paused")
	clk.Advance(time.Second)
	for i := 11; i <= 20; i++ {
		fast.ExpectAck(packet.PUBACK, uint16(i))
	}
	if p := fast.RecvWithin(100 * time.Millisecond); p != nil {
		t.Fatalf("more than a second's worth after one second: %s", packet.Describe(p))
	}
	clk.Advance(time.Second)
	for i := 21; i <= 30; i++ {
		fast.ExpectAck(packet.PUBACK, uint16(i))
	}
	if got := limitsHit(n, metrics.LimitPublishRate); got < 2 {
		t.Fatalf("publish rate hits %v", got)
	}
}

// TestPublishLimitsDisconnect: with publish-limit-action disconnect, a
// client over publish-rate gets DISCONNECT 0x96, one over publish-bytes
// 0x97 (3.1.1 clients are closed); others carry on.
func TestPublishLimitsDisconnect(t *testing.T) {
	clk := clocktest.New(time.Now())
	cfg := brokertest.Config(t)
	cfg.PublishRate, cfg.PublishBytes, cfg.PublishLimit, cfg.LimitLoopback = 5, 3000, "disconnect", true
	cfg.MaxPacketSize = 2048 // the bytes burst is the larger of the two
	n := brokertest.StartClock(t, cfg, clk)
	check := bystanders(t, n)

	many := connectOK(t, n.Raw(packet.V5), login(packet.V5, "many", "", ""))
	for i := 0; i < 6; i++ {
		_ = many.SendBytes(mustEncode(t, pub("many", 0, 0, "x")))
	}
	many.ExpectDisconnect(packet.MessageRateTooHigh)

	big := connectOK(t, n.Raw(packet.V5), login(packet.V5, "big", "", ""))
	payload := string(bytes.Repeat([]byte("x"), 1000))
	for i := 0; i < 4; i++ {
		_ = big.SendBytes(mustEncode(t, pub("big", 0, 0, payload)))
	}
	big.ExpectDisconnect(packet.QuotaExceeded)

	old := connectOK(t, n.Raw(packet.V311), login(packet.V311, "old", "", ""))
	for i := 0; i < 6; i++ {
		_ = old.SendBytes(mustEncode3(t, pub("old", 0, 0, "x")))
	}
	old.ExpectClosedSilently()
	check("after three clients were disconnected")
	if limitsHit(n, metrics.LimitPublishRate) != 2 || limitsHit(n, metrics.LimitPublishBytes) != 1 {
		t.Fatalf("hits: rate %v bytes %v", limitsHit(n, metrics.LimitPublishRate), limitsHit(n, metrics.LimitPublishBytes))
	}
}

func mustEncode3(t *testing.T, p packet.Packet) []byte {
	t.Helper()
	b, err := p.Append(nil, packet.V311)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSubscriptionAndClientIDLimits: past max-subscriptions a new filter is
// refused (0x97) and a client id longer than max-client-id-length is
// refused (0x85), while other clients carry on.
func TestSubscriptionAndClientIDLimits(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxSubscriptions, cfg.MaxClientIDLength = 2, 16
	n := brokertest.Start(t, cfg)
	check := bystanders(t, n)
	c := connectOK(t, n.Raw(packet.V5), login(packet.V5, "greedy", "", ""))
	if sa := c.Subscribe(1, sub("a", 0), sub("b", 0), sub("c", 0)); sa.Codes[2] != packet.QuotaExceeded {
		t.Fatalf("third subscription: %v", sa.Codes)
	}
	if got := refused(t, n.Raw(packet.V5), login(packet.V5, "a-client-id-that-is-too-long", "", "")); got != packet.ClientIdentifierNotValid {
		t.Fatalf("long client id: %v", got)
	}
	check("after the refusals")
}
