package broker_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestClientThatSendsButDoesNotReadIsDropped: a client that keeps sending
// requests but never reads fills the socket, then the broker's response
// queue, at which point the broker stops reading it. When the write times
// out the connection must still end (its will published), not hang with
// its reader parked forever.
func TestClientThatSendsButDoesNotReadIsDropped(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.WriteTimeout = time.Second
	n := brokertest.Start(t, cfg)
	w := v5(n, "watcher")
	w.Sub("will/#", 0)

	c := n.Dial()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	r := brokertest.NewRaw(t, c, packet.V5)
	cp := connect5("deaf", true, 0)
	cp.WillFlag, cp.WillTopic, cp.WillPayload = true, "will/deaf", []byte("x")
	r.Send(cp)
	brokertest.Expect[*packet.Connack](r)
	r.Subscribe(1, sub("flood", 0))
	r.Pause() // from now on the client reads nothing

	// Fill the socket with deliveries the client does not read.
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	big := bytes.Repeat([]byte("x"), 64<<10)
	for i := 0; i < 200; i++ {
		p.Send(&packet.Publish{Topic: "flood", Payload: big})
	}
	// Then more requests than the broker keeps responses for.
	pings := bytes.Repeat([]byte{0xc0, 0x00}, 5000)
	_ = r.SendBytes(pings)

	if m := w.Next(); m.Topic != "will/deaf" {
		t.Fatalf("got %s", brokertest.String(m))
	}
}

// TestMaxConnections: past max-connections CONNECT is refused cleanly (v5
// 0x89 Server Busy, 3.1.1 return code 3), and a freed slot is reusable.
func TestMaxConnections(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxConnections = 2
	n := brokertest.Start(t, cfg)
	a, _ := rawConnect(t, n, connect5("a", true, 0))
	rawConnect(t, n, connect5("b", true, 0))

	r, ack := n.RawConnect(connect5("c", true, 0))
	if ack.ReasonCode != packet.ServerBusy {
		t.Fatalf("v5 over the limit: %s", packet.Describe(ack))
	}
	r.ExpectClosedSilently()
	r3, ack3 := n.RawConnect(connect3("c3", true))
	if ack3.ReasonCode != packet.ServerUnavailable {
		t.Fatalf("3.1.1 over the limit: %s", packet.Describe(ack3))
	}
	r3.ExpectClosedSilently()
	c := n.Dial()
	b, _ := connect3("c3", true).Append(nil, packet.V311)
	_, _ = c.Write(b)
	got := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte{0x20, 0x02, 0x00, 0x03}) {
		t.Fatalf("3.1.1 refusal bytes % x (%v), want return code 3", got, err)
	}

	// A client taking over its own session is not a new connection.
	rawConnect(t, n, connect5("a", true, 0))
	a.Closed()

	a2, _ := rawConnect(t, n, connect5("a", true, 0))
	a2.Send(&packet.Disconnect{})
	a2.Closed()
	n.WaitSessions(1, 0)
	rawConnect(t, n, connect5("d", true, 0))
	if got := brokertest.Value(n.Metrics().ConnectionsRefused.WithLabelValues(packet.ServerBusy.String())); got != 3 {
		t.Fatalf("connections refused metric %v, want 3", got)
	}
}

// TestConnectTimeout: a connection that sends no CONNECT, or only part of
// one, is closed after connect-timeout.
func TestConnectTimeout(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.ConnectTimeout = 200 * time.Millisecond
	n := brokertest.Start(t, cfg)
	silent := n.Raw(packet.V5)
	partial := n.Raw(packet.V5)
	b, _ := connect5("x", true, 0).Append(nil, packet.V5)
	_ = partial.SendBytes(b[:5])
	silent.ExpectClosedSilently()
	partial.ExpectClosedSilently()
	// The node still serves.
	rawConnect(t, n, connect5("ok", true, 0))
}

// TestMaxSubscriptionsPerClient: past max-subscriptions a new filter gets
// 0x97 (3.1.1: 0x80); replacing an existing subscription is still allowed.
func TestMaxSubscriptionsPerClient(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxSubscriptions = 2
	n := brokertest.Start(t, cfg)
	c, _ := rawConnect(t, n, connect5("c", true, 0))
	sa := c.Subscribe(1, sub("a", 1), sub("b", 2), sub("c", 0))
	if !slices.Equal(sa.Codes, []packet.ReasonCode{packet.GrantedQoS1, packet.GrantedQoS2, packet.QuotaExceeded}) {
		t.Fatalf("SUBACK %s", packet.Describe(sa))
	}
	if sa := c.Subscribe(2, sub("a", 2)); sa.Codes[0] != packet.GrantedQoS2 {
		t.Fatalf("replacing at the limit: %s", packet.Describe(sa))
	}
	if sa := c.Subscribe(3, sub("d", 0)); sa.Codes[0] != packet.QuotaExceeded {
		t.Fatalf("new filter at the limit: %s", packet.Describe(sa))
	}
	c.Send(&packet.Unsubscribe{PacketID: 4, Filters: []string{"b"}})
	brokertest.Expect[*packet.Unsuback](c)
	if sa := c.Subscribe(5, sub("d", 0)); sa.Codes[0] != packet.GrantedQoS0 {
		t.Fatalf("after unsubscribe: %s", packet.Describe(sa))
	}
	c3, _ := rawConnect(t, n, connect3("c3", true))
	if sa := c3.Subscribe(1, sub("a", 1), sub("b", 1), sub("c", 1)); sa.Codes[2] != packet.UnspecifiedError {
		t.Fatalf("3.1.1 SUBACK %s", packet.Describe(sa))
	}
}

// TestMaxTopicLengthAndLevels: names and filters beyond the limits are
// refused: PUBACK/SUBACK failure codes, or the end of the connection.
func TestMaxTopicLengthAndLevels(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxTopicLength = 16
	cfg.MaxTopicLevels = 3
	n := brokertest.Start(t, cfg)
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	sa := s.Subscribe(1, sub("a/b/c", 1), sub("a/b/c/d", 1), sub("abcdefghijklmnopq", 1), sub("#", 1))
	if !slices.Equal(sa.Codes, []packet.ReasonCode{packet.GrantedQoS1, packet.TopicFilterInvalid, packet.TopicFilterInvalid, packet.GrantedQoS1}) {
		t.Fatalf("SUBACK %s", packet.Describe(sa))
	}
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	for i, tp := range []string{"a/b/c/d", "abcdefghijklmnopq"} {
		p.Send(pub(tp, 1, uint16(i+1), "x"))
		if a := p.ExpectAck(packet.PUBACK, uint16(i+1)); a.ReasonCode != packet.TopicNameInvalid {
			t.Fatalf("%q: %s", tp, packet.Describe(a))
		}
	}
	publishAcked(t, p, 3, pub("a/b/c", 1, 0, "fits"))
	if got := drain(t, s); len(got) != 1 || got[0].Topic != "a/b/c" {
		t.Fatalf("subscriber got %v", got)
	}
	p.Send(pub("a/b/c/d", 0, 0, "x"))
	p.ExpectDisconnect(packet.TopicNameInvalid)
	p3, _ := rawConnect(t, n, connect3("p3", true))
	p3.Send(pub("a/b/c/d", 1, 1, "x"))
	p3.ExpectClosedSilently()
}

// TestMaxQueuedMessagesDropPolicy: a full session queue drops its oldest
// QoS 0 message first, then new QoS 0 messages, counting each as
// queue_full; QoS 1 messages are kept.
func TestMaxQueuedMessagesDropPolicy(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 3
	n := brokertest.Start(t, cfg)
	cp := connect5("s", true, 0)
	cp.Props.SetReceiveMaximum(1) // one in flight: the rest waits in the queue
	s, _ := rawConnect(t, n, cp)
	s.Subscribe(1, sub("q", 1))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	for i, m := range []struct {
		qos  byte
		name string
	}{{1, "m1"}, {1, "b1"}, {0, "a"}, {0, "c"}, {0, "d"}, {1, "b2"}, {1, "b3"}, {0, "e"}} {
		publishAcked(t, p, uint16(i+1), pub("q", m.qos, 0, m.name))
	}
	// Queue after each: [b1] [b1 a] [b1 a c] [b1 c d]-a [b1 d b2]-c [b1 b2 b3]-d, e dropped.
	if d := n.Dropped(metrics.DropQueueFull); d != 4 {
		t.Fatalf("dropped{queue_full} = %v, want 4", d)
	}
	var got []string
	for i := 0; i < 4; i++ {
		m := brokertest.Expect[*packet.Publish](s)
		got = append(got, string(m.Payload))
		s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}
	if want := []string{"m1", "b1", "b2", "b3"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	expectNothing(t, s, "dropped message delivered")
}

// TestSlowConsumerNonPersistent: a non-persistent subscriber that stops
// reading with QoS 1 traffic is disconnected with 0x97 after
// slow-consumer-timeout and counted; the publisher is released.
func TestSlowConsumerNonPersistent(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 5
	cfg.SlowConsumer = 300 * time.Millisecond
	n := brokertest.Start(t, cfg)
	cp := connect5("slow", true, 0)
	cp.Props.SetReceiveMaximum(2)
	s, _ := rawConnect(t, n, cp)
	s.Subscribe(1, sub("sc", 1))
	s.Pause()
	fast, _ := rawConnect(t, n, connect5("fast", true, 0))
	fast.Subscribe(1, sub("sc", 1))

	p, _ := rawConnect(t, n, connect5("p", true, 0))
	const total = 10 // 2 in flight + 5 queued, then the queue is full
	for i := 1; i <= total; i++ {
		publishAcked(t, p, uint16(i), pub("sc", 1, 0, "x"))
	}
	s.Resume()
	s.ExpectDisconnect(packet.QuotaExceeded)
	if got := brokertest.Value(n.Metrics().SlowConsumers); got != 1 {
		t.Fatalf("sextant_slow_consumers_total = %v", got)
	}
	if got := n.Dropped(metrics.DropSlowConsumer); got < 1 {
		t.Fatalf("dropped{slow_consumer} = %v", got)
	}
	// The other subscriber got everything.
	got := 0
	for got < total {
		m := brokertest.Expect[*packet.Publish](fast)
		fast.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
		got++
	}
}

// TestSlowConsumerPersistent: a persistent subscriber that stops reading
// keeps its messages (spilled to disk past the in-memory queue), the
// publisher is never held back, and it gets every message, in order, once
// it resumes.
func TestSlowConsumerPersistent(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 5
	cfg.SlowConsumer = 100 * time.Millisecond
	n := brokertest.Start(t, cfg)
	cp := connect5("slow", true, 3600)
	cp.Props.SetReceiveMaximum(2)
	s, _ := rawConnect(t, n, cp)
	s.Subscribe(1, sub("sp", 1))
	s.Pause()

	p, _ := rawConnect(t, n, connect5("p", true, 0))
	const total = 60
	for i := 1; i <= total; i++ {
		publishAcked(t, p, uint16(i), pub("sp", 1, 0, fmt.Sprint(i)))
	}
	if got := brokertest.Value(n.Metrics().SlowConsumers); got != 0 {
		t.Fatalf("persistent subscriber counted as slow: %v", got)
	}
	s.Resume()
	for i := 1; i <= total; i++ {
		m := s.ExpectPublish("sp", fmt.Sprint(i))
		s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}
	expectNothing(t, s, "duplicate after resume")
	if d := n.Dropped(metrics.DropQueueFull) + n.Dropped(metrics.DropSessionQuota); d != 0 {
		t.Fatalf("%v messages dropped", d)
	}
}

// TestPublishingToOwnSubscriptionIsNotSlowConsumer: a client subscribed to
// the topic it publishes on, reading and acknowledging everything promptly,
// must not be treated as a slow consumer when it pipelines more messages
// than its queue holds: the queue drains only as the client's
// acknowledgements are read, by the same reader that routes its publishes.
func TestPublishingToOwnSubscriptionIsNotSlowConsumer(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 5
	cfg.SlowConsumer = 300 * time.Millisecond
	n := brokertest.Start(t, cfg)
	cp := connect5("echo", true, 0)
	cp.Props.SetReceiveMaximum(2)
	c, _ := rawConnect(t, n, cp)
	c.Subscribe(1, sub("echo", 1))
	const total = 20
	for i := 1; i <= total; i++ {
		c.Send(pub("echo", 1, uint16(i), fmt.Sprint(i)))
	}
	acks, msgs := 0, 0
	for acks < total || msgs < total {
		switch p := c.Recv().(type) {
		case *packet.Ack:
			acks++
		case *packet.Publish:
			msgs++
			c.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID})
		case *packet.Disconnect:
			t.Fatalf("after %d messages and %d acks: %s", msgs, acks, packet.Describe(p))
		}
	}
	if got := brokertest.Value(n.Metrics().SlowConsumers); got != 0 {
		t.Fatalf("slow consumers %v", got)
	}
}
