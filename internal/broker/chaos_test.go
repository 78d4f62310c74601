package broker_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// chaosSub is a persistent QoS 2 subscriber that keeps the client side of
// MQTT's delivery state across connections, as a real client must: QoS 2
// packet ids received and not yet released. It records what it delivered
// to its "application".
type chaosSub struct {
	t         *testing.T
	r         *brokertest.Raw // nil while disconnected
	unrel     map[uint16]string
	delivered map[string]int
	firsts    map[int][]int // publisher -> sequence numbers in first-delivery order
}

func (c *chaosSub) handle(p packet.Packet) {
	t := c.t
	switch p := p.(type) {
	case *packet.Publish:
		payload := string(p.Payload)
		switch p.QoS {
		case 1:
			c.deliver(payload)
			c.r.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID})
		case 2:
			if prev, ok := c.unrel[p.PacketID]; ok {
				if prev != payload {
					t.Fatalf("packet id %d reused for %q while %q awaits PUBREL", p.PacketID, payload, prev)
				}
				if !p.Dup {
					t.Fatalf("resend of %q without DUP", payload)
				}
			} else {
				c.unrel[p.PacketID] = payload
				c.deliver(payload)
			}
			c.r.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: p.PacketID})
		default:
			t.Fatalf("QoS 0 delivery %s", packet.Describe(p))
		}
	case *packet.Ack:
		if p.Kind != packet.PUBREL {
			t.Fatalf("unexpected %s", packet.Describe(p))
		}
		delete(c.unrel, p.PacketID)
		c.r.Send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID})
	case *packet.Disconnect:
		if p.ReasonCode != packet.ServerShuttingDown {
			t.Fatalf("unexpected %s", packet.Describe(p))
		}
	default:
		t.Fatalf("unexpected %s", packet.Describe(p))
	}
}

func (c *chaosSub) deliver(payload string) {
	c.delivered[payload]++
	if c.delivered[payload] == 1 {
		var pub, seq int
		fmt.Sscanf(payload, "p%d-%d", &pub, &seq)
		c.firsts[pub] = append(c.firsts[pub], seq)
	}
}

// TestChaosPersistentSubscriber drives a persistent subscriber with a small
// queue and window through random abnormal disconnects, reconnects and node
// restarts while publishers send QoS 1 and 2 messages, every one
// acknowledged. Checked at the end: every message delivered, QoS 2 exactly
// once, QoS 1 at least once, first deliveries in each publisher's order.
func TestChaosPersistentSubscriber(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 2))
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 4
	cfg.MaxInflight = 3
	n := brokertest.Start(t, cfg)

	c := &chaosSub{t: t, unrel: map[uint16]string{}, delivered: map[string]int{}, firsts: map[int][]int{}}
	c.r, _ = rawConnect(t, n, connect5("s", true, 3600))
	c.r.Subscribe(1, sub("c/#", 2))
	reconnect := func() {
		t.Helper()
		var ack *packet.Connack
		c.r, ack = rawConnect(t, n, connect5("s", false, 3600))
		if !ack.SessionPresent {
			t.Fatal("subscriber session lost")
		}
	}

	const publishers = 3
	pubs := make([]*brokertest.Raw, publishers)
	connectPubs := func() {
		for i := range pubs {
			pubs[i], _ = rawConnect(t, n, connect5(fmt.Sprint("p", i), true, 0))
		}
	}
	connectPubs()
	sent := map[string]byte{}
	seqs := make([]int, publishers)
	pid := uint16(0)

	for step := 0; step < 600; step++ {
		switch x := rng.IntN(100); {
		case x < 50:
			i := rng.IntN(publishers)
			seqs[i]++
			payload := fmt.Sprintf("p%d-%d", i, seqs[i])
			q := byte(1 + rng.IntN(2))
			pid = pid%60000 + 1
			publishAcked(t, pubs[i], pid, pub(fmt.Sprint("c/", i), q, 0, payload))
			sent[payload] = q
		case x < 85:
			if c.r != nil {
				for _, p := range c.r.Available() {
					c.handle(p)
				}
			}
		case x < 93:
			if c.r != nil {
				c.r.Close()
				c.r = nil
				n.WaitSessions(publishers, 1)
			}
		case x < 98:
			if c.r == nil {
				reconnect()
			}
		default:
			n = n.Restart()
			if c.r != nil {
				c.r.Close() // what it had not handled is lost in transit
				c.r = nil
			}
			connectPubs()
		}
	}
	if c.r == nil {
		reconnect()
	}
	for len(c.unrel) > 0 || len(c.delivered) < len(sent) {
		c.handle(c.r.Recv())
	}
	for payload, q := range sent {
		got := c.delivered[payload]
		if got == 0 || (q == 2 && got != 1) {
			t.Errorf("%s (QoS %d) delivered %d times", payload, q, got)
		}
	}
	if len(c.delivered) != len(sent) {
		t.Errorf("%d distinct messages delivered, %d sent", len(c.delivered), len(sent))
	}
	for p, order := range c.firsts {
		for i := 1; i < len(order); i++ {
			if order[i] <= order[i-1] {
				t.Fatalf("publisher %d: first deliveries out of order: %v", p, order)
			}
		}
	}
	t.Logf("%d messages, %d deliveries to the subscriber", len(sent), sum(c.delivered))
}

func sum(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

// TestChaosSharedGroup: members of a shared group (non-persistent, small
// windows) come and go at random, at least one always connected, while QoS 1
// messages are published. Every acknowledged message must reach some member:
// a member that leaves with messages unacknowledged hands them on.
func TestChaosSharedGroup(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 3))
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 1000 // never full: no back-pressure, no slow consumers
	n := brokertest.Start(t, cfg)
	const members = 3
	conns := make([]*brokertest.Raw, members)
	join := func(i int) {
		cp := connect5(fmt.Sprint("m", i), true, 0)
		cp.Props.SetReceiveMaximum(2)
		conns[i], _ = rawConnect(t, n, cp)
		conns[i].Subscribe(1, sub("$share/g/sh/#", 1))
	}
	for i := range conns {
		join(i)
	}
	online := func() int {
		k := 0
		for _, c := range conns {
			if c != nil {
				k++
			}
		}
		return k
	}
	got := map[string]int{}
	handle := func(c *brokertest.Raw, acking bool) {
		for _, p := range c.Available() {
			m, ok := p.(*packet.Publish)
			if !ok {
				continue // SUBACK
			}
			got[string(m.Payload)]++
			if acking {
				c.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
			}
		}
	}
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	sent := 0
	for step := 0; step < 800; step++ {
		i := rng.IntN(members)
		switch x := rng.IntN(100); {
		case x < 50:
			sent++
			publishAcked(t, p, uint16(sent), pub("sh/x", 1, 0, fmt.Sprint(sent)))
		case x < 80:
			if conns[i] != nil {
				handle(conns[i], true)
			}
		case x < 90:
			if conns[i] != nil && online() > 1 {
				// Leave without acknowledging what arrived: those go to
				// another member. What was not read yet is redelivered too.
				conns[i].Close()
				conns[i] = nil
				n.WaitSessions(online()+1, 0)
			}
		default:
			if conns[i] == nil {
				join(i)
			}
		}
	}
	// Leave one member: the others hand it what they hold.
	var last *brokertest.Raw
	for i, c := range conns {
		if c == nil {
			continue
		}
		if last == nil {
			last = c
			continue
		}
		c.Close()
		conns[i] = nil
		n.WaitSessions(online()+1, 0)
	}
	for len(got) < sent {
		pk := last.RecvWithin(5 * time.Second)
		if pk == nil {
			var missing []int
			for k := 1; k <= sent && len(missing) < 10; k++ {
				if got[fmt.Sprint(k)] == 0 {
					missing = append(missing, k)
				}
			}
			t.Fatalf("%d of %d messages reached the group; missing %v...", len(got), sent, missing)
		}
		if m, ok := pk.(*packet.Publish); ok {
			got[string(m.Payload)]++
			last.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
		}
	}
	if d := n.Dropped("queue_full"); d != 0 {
		t.Fatalf("%v dropped", d)
	}
	t.Logf("%d messages, %d deliveries", sent, sum(got))
}
