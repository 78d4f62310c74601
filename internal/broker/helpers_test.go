package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// connect5 is a v5 CONNECT; expiry is the Session Expiry Interval (0: the
// property is left out).
func connect5(id string, clean bool, expiry uint32) *packet.Connect {
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, ClientID: id, CleanStart: clean, KeepAlive: 60}
	if expiry > 0 {
		cp.Props.SetSessionExpiry(expiry)
	}
	return cp
}

// connect3 is a 3.1.1 CONNECT.
func connect3(id string, clean bool) *packet.Connect {
	return &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, ClientID: id, CleanStart: clean, KeepAlive: 60}
}

// rawConnect connects a raw client and fails the test unless CONNACK is a
// success.
func rawConnect(t *testing.T, n *brokertest.Node, cp *packet.Connect) (*brokertest.Raw, *packet.Connack) {
	t.Helper()
	r, ack := n.RawConnect(cp)
	if ack.ReasonCode != packet.Success {
		t.Fatalf("CONNACK %s", packet.Describe(ack))
	}
	return r, ack
}

func sub(filter string, qos byte) packet.Subscription {
	return packet.Subscription{Filter: filter, QoS: qos}
}

// pub is a PUBLISH to send.
func pub(topic string, qos byte, pid uint16, payload string) *packet.Publish {
	return &packet.Publish{Topic: topic, QoS: qos, PacketID: pid, Payload: []byte(payload)}
}

// publishAcked sends a PUBLISH and completes its flow (QoS 0: a PINGREQ
// round trip, as the reader routes a publish before reading the next
// packet), so the message has been routed to every subscriber when it
// returns. It returns the PUBACK or PUBREC (nil for QoS 0).
func publishAcked(t *testing.T, r *brokertest.Raw, pid uint16, p *packet.Publish) *packet.Ack {
	t.Helper()
	if p.QoS == 0 {
		p.PacketID = 0
		r.Send(p)
		if got := r.Ping(); len(got) > 0 {
			t.Fatalf("publisher got %s", packet.Describe(got[0]))
		}
		return nil
	}
	p.PacketID = pid
	r.Send(p)
	kind := packet.PUBACK
	if p.QoS == 2 {
		kind = packet.PUBREC
	}
	a := r.ExpectAck(kind, pid)
	if p.QoS == 2 {
		r.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: pid})
		r.ExpectAck(packet.PUBCOMP, pid)
	}
	return a
}

// v5 connects a paho v5 client with clean start.
func v5(n *brokertest.Node, id string) *brokertest.V5 {
	return n.ConnectV5(&paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
}

// manualClock is a manual clock starting at the wall clock's time (socket
// deadlines are computed from the broker's clock).
func manualClock() *clocktest.Manual { return clocktest.New(time.Now()) }

// fastConfig is a test node config with short timeouts.
func fastConfig(t *testing.T) config.Config {
	c := brokertest.Config(t)
	c.ConnectTimeout = 500 * time.Millisecond
	c.SlowConsumer = 500 * time.Millisecond
	return c
}

func u32(v uint32) *uint32 { return &v }
func u16(v uint16) *uint16 { return &v }

// drain returns the PUBLISH packets the broker has queued for r so far. It
// publishes a QoS 0 marker to "$d" (no "#" subscriber sees a $-topic),
// which r subscribes to, and collects until its own marker comes back:
// deliveries leave a session's queue in order, so everything routed to r
// before has arrived by then. Other clients' markers are skipped. (A
// PINGREQ is no barrier for deliveries: a response may leave before
// messages queued earlier.) It must not be used while r's in-flight window
// is full, which holds back QoS 0 messages queued behind.
func drain(t *testing.T, r *brokertest.Raw) []*packet.Publish {
	t.Helper()
	const topic = "$d"
	marker := fmt.Sprintf("%p", r)
	r.Subscribe(0xfff0, sub(topic, 0))
	r.Send(pub(topic, 0, 0, marker))
	var out []*packet.Publish
	for {
		p := brokertest.Expect[*packet.Publish](r)
		switch {
		case p.Topic == topic && string(p.Payload) == marker:
			return out
		case p.Topic == topic:
		default:
			out = append(out, p)
		}
	}
}

// expectNothing checks that nothing was queued for r (see drain).
func expectNothing(t *testing.T, r *brokertest.Raw, what string) {
	t.Helper()
	if got := drain(t, r); len(got) > 0 {
		t.Fatalf("%s: got %s", what, packet.Describe(got[0]))
	}
}

func ctx5() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

func intp(v int) *int { return &v }
