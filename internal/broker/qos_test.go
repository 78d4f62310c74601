package broker_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestQoSFlowsBothDirections publishes at each QoS to subscriptions at each
// QoS, for v5 and 3.1.1 publishers and subscribers, and checks the delivered
// QoS (the minimum), the packet ids and every acknowledgement of both flows.
func TestQoSFlowsBothDirections(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	for _, pv := range []packet.Version{packet.V5, packet.V311} {
		for _, sv := range []packet.Version{packet.V5, packet.V311} {
			pc := connect5("pub", true, 0)
			pc.Version = pv
			p, _ := rawConnect(t, n, pc)
			sc := connect5("sub", true, 0)
			sc.Version = sv
			s, _ := rawConnect(t, n, sc)
			for sq := byte(0); sq <= 2; sq++ {
				filter := fmt.Sprintf("q/%d", sq)
				sa := s.Subscribe(1, sub(filter, sq))
				if sa.Codes[0] != packet.ReasonCode(sq) {
					t.Fatalf("SUBACK %s", packet.Describe(sa))
				}
			}
			for pq := byte(0); pq <= 2; pq++ {
				for sq := byte(0); sq <= 2; sq++ {
					name := fmt.Sprintf("v%d->v%d pub q%d sub q%d", pv, sv, pq, sq)
					topic := fmt.Sprintf("q/%d", sq)
					pid := uint16(10*pq + sq + 1)
					payload := name
					switch pq {
					case 0:
						p.Send(pub(topic, 0, 0, payload))
					case 1:
						p.Send(pub(topic, 1, pid, payload))
						if a := p.ExpectAck(packet.PUBACK, pid); a.ReasonCode != packet.Success {
							t.Fatalf("%s: PUBACK %s", name, packet.Describe(a))
						}
					case 2:
						p.Send(pub(topic, 2, pid, payload))
						p.ExpectAck(packet.PUBREC, pid)
						p.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: pid})
						p.ExpectAck(packet.PUBCOMP, pid)
					}
					m := s.ExpectPublish(topic, payload)
					want := min(pq, sq)
					if m.QoS != want {
						t.Fatalf("%s: delivered at QoS %d, want %d", name, m.QoS, want)
					}
					if (m.PacketID != 0) != (want > 0) || m.Dup || m.Retain {
						t.Fatalf("%s: %s", name, packet.Describe(m))
					}
					switch want {
					case 1:
						s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
					case 2:
						s.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: m.PacketID})
						s.ExpectAck(packet.PUBREL, m.PacketID)
						s.Send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: m.PacketID})
					}
				}
			}
			// Every outbound flow was completed: nothing is left in flight.
			if got := s.Ping(); len(got) != 0 {
				t.Fatalf("unexpected %s", packet.Describe(got[0]))
			}
			brokertest.Eventually(t, 5*time.Second, func() bool {
				return brokertest.Value(n.Metrics().InflightMessages) == 0
			}, "in-flight messages drained")
			p.Send(&packet.Disconnect{})
			s.Send(&packet.Disconnect{})
			p.Closed()
			s.Closed()
		}
	}
}

// TestQoS2InboundExactlyOnce resends a QoS 2 PUBLISH (DUP) before PUBREL,
// and on a new connection of the same session: it is routed once.
func TestQoS2InboundExactlyOnce(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s := v5(n, "s")
	s.Sub("x", 2)
	p, _ := rawConnect(t, n, connect5("p", true, 60))
	m := pub("x", 2, 7, "once")
	p.Send(m)
	p.ExpectAck(packet.PUBREC, 7)
	m.Dup = true
	p.Send(m)
	p.ExpectAck(packet.PUBREC, 7)
	// Reconnect (the session keeps the id) and send it again.
	p.Close()
	p, _ = rawConnect(t, n, connect5("p", false, 60))
	p.Send(m)
	p.ExpectAck(packet.PUBREC, 7)
	p.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: 7})
	p.ExpectAck(packet.PUBCOMP, 7)
	// The id is free again: a new message with it is a new message.
	p.Send(pub("x", 2, 7, "twice"))
	p.ExpectAck(packet.PUBREC, 7)
	p.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: 7})
	p.ExpectAck(packet.PUBCOMP, 7)

	if got := s.Next(); string(got.Payload) != "once" {
		t.Fatalf("got %s", brokertest.String(got))
	}
	if got := s.Next(); string(got.Payload) != "twice" {
		t.Fatalf("got %s (a duplicate was routed)", brokertest.String(got))
	}
}

// TestReceiveMaximumWindow checks that the broker never has more than the
// client's Receive Maximum QoS 1/2 messages unacknowledged towards it, and
// never more than max-inflight.
func TestReceiveMaximumWindow(t *testing.T) {
	for _, tc := range []struct {
		name        string
		recvMax     uint16 // 0: not sent
		maxInflight uint16
		window      int
	}{
		{"client receive maximum", 3, 100, 3},
		{"broker max-inflight", 0, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := brokertest.Config(t)
			cfg.MaxInflight = tc.maxInflight
			n := brokertest.Start(t, cfg)
			cp := connect5("s", true, 0)
			if tc.recvMax > 0 {
				cp.Props.SetReceiveMaximum(tc.recvMax)
			}
			s, _ := rawConnect(t, n, cp)
			s.Subscribe(1, sub("w/#", 2))
			p, _ := rawConnect(t, n, connect5("p", true, 0))
			const total = 12
			for i := 1; i <= total; i++ {
				publishAcked(t, p, uint16(i), pub("w/x", byte(1+i%2), 0, fmt.Sprint(i)))
			}
			// Every message is now queued for s; the broker sends the window.
			var unacked []*packet.Publish
			next := 1
			for next <= total || len(unacked) > 0 {
				for len(unacked) < tc.window && next <= total {
					m := s.ExpectPublish("w/x", fmt.Sprint(next))
					unacked = append(unacked, m)
					next++
				}
				// The window is full: nothing more comes until an ack.
				if got := s.Ping(); len(got) != 0 {
					t.Fatalf("%d unacknowledged, window %d, yet the broker sent %s",
						len(unacked), tc.window, packet.Describe(got[0]))
				}
				// Acknowledge the oldest (QoS 2 needs its PUBREL/PUBCOMP to free the slot).
				m := unacked[0]
				unacked = unacked[1:]
				if m.QoS == 1 {
					s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
				} else {
					s.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: m.PacketID})
					s.ExpectAck(packet.PUBREL, m.PacketID)
					// Still in flight until PUBCOMP.
					if got := s.Ping(); len(got) != 0 {
						t.Fatalf("broker sent %s while a QoS 2 flow awaited PUBCOMP with a full window", packet.Describe(got[0]))
					}
					s.Send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: m.PacketID})
				}
			}
		})
	}
}

// TestReceiveMaximumWithManualAckPaho is the same check with a real client:
// paho with manual acknowledgement and Receive Maximum 2.
func TestReceiveMaximumWithManualAckPaho(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	got := make(chan *paho.Publish, 100)
	var client *paho.Client
	s, err := n.TryConnectV5(&paho.Connect{ClientID: "s", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{ReceiveMaximum: u16(2)}}, func(c *paho.ClientConfig) {
		c.EnableManualAcknowledgment = true
		c.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			got <- pr.Packet
			return true, nil
		}}
	})
	if err != nil {
		t.Fatal(err)
	}
	client = s.Client
	s.Sub("m", 1)
	p := v5(n, "p")
	for i := 0; i < 6; i++ {
		p.Pub("m", 1, false, fmt.Sprint(i))
	}
	// All six are routed (each PUBACK came after routing). The broker may
	// have sent two; the other four wait in the session's queue.
	m := n.Metrics()
	brokertest.Eventually(t, 5*time.Second, func() bool {
		return brokertest.Value(m.InflightMessages) == 2 && brokertest.Value(m.QueuedMessages) == 4
	}, "two in flight, four queued")
	var held []*paho.Publish
	for i := 0; i < 6; i++ {
		if len(held) == 2 {
			if q := brokertest.Value(m.QueuedMessages) + brokertest.Value(m.InflightMessages); q != float64(6-i+2) {
				t.Fatalf("%v queued + in flight with %d received", q, i)
			}
			if err := client.Ack(held[0]); err != nil {
				t.Fatal(err)
			}
			held = held[1:]
		}
		select {
		case m := <-got:
			if string(m.Payload) != fmt.Sprint(i) {
				t.Fatalf("got %q, want %d", m.Payload, i)
			}
			held = append(held, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d not delivered", i)
		}
	}
	if brokertest.Value(m.InflightMessages) != 2 {
		t.Fatal("in-flight gauge is not 2 with two unacknowledged messages")
	}
}

// TestRedeliveryOnReconnectWithDup: a persistent session's unacknowledged
// messages are sent again on reconnect, with the same packet id and DUP set;
// a QoS 2 message whose PUBREC was received gets its PUBREL again.
func TestRedeliveryOnReconnectWithDup(t *testing.T) {
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(v.String(), func(t *testing.T) {
			n := brokertest.Start(t, brokertest.Config(t))
			cp := connect5("s", false, 300) // 3.1.1: clean session 0 is a persistent session
			cp.Version = v
			s, _ := rawConnect(t, n, cp)
			s.Subscribe(1, sub("r/#", 2))
			p, _ := rawConnect(t, n, connect5("p", true, 0))
			publishAcked(t, p, 1, pub("r/1", 1, 0, "one"))
			publishAcked(t, p, 2, pub("r/2", 2, 0, "two"))
			publishAcked(t, p, 3, pub("r/3", 2, 0, "three"))
			m1 := s.ExpectPublish("r/1", "one")
			m2 := s.ExpectPublish("r/2", "two")
			m3 := s.ExpectPublish("r/3", "three")
			if m1.Dup || m2.Dup || m3.Dup {
				t.Fatal("DUP set on first delivery")
			}
			s.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: m3.PacketID})
			s.ExpectAck(packet.PUBREL, m3.PacketID)
			s.Close() // no acks for 1 and 2, no PUBCOMP for 3
			n.WaitSessions(1, 1)

			s, ack := rawConnect(t, n, cp)
			if !ack.SessionPresent {
				t.Fatal("session not present")
			}
			r1 := s.ExpectPublish("r/1", "one")
			r2 := s.ExpectPublish("r/2", "two")
			rel := s.ExpectAck(packet.PUBREL, m3.PacketID)
			_ = rel
			if !r1.Dup || !r2.Dup || r1.PacketID != m1.PacketID || r2.PacketID != m2.PacketID || r1.QoS != 1 || r2.QoS != 2 {
				t.Fatalf("redelivered %s / %s, first sent with ids %d, %d", packet.Describe(r1), packet.Describe(r2), m1.PacketID, m2.PacketID)
			}
			s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: r1.PacketID})
			s.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: r2.PacketID})
			s.ExpectAck(packet.PUBREL, r2.PacketID)
			s.Send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: r2.PacketID})
			s.Send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: m3.PacketID})
			// All done: a third connection gets nothing again.
			s.Ping()
			s.Close()
			n.WaitSessions(1, 1)
			s, _ = rawConnect(t, n, cp)
			if got := s.Ping(); len(got) != 0 {
				t.Fatalf("acknowledged message sent again: %s", packet.Describe(got[0]))
			}
		})
	}
}

// TestClientExceedingReceiveMaximum: a v5 client with more QoS 1/2 publishes
// unacknowledged than the broker's Receive Maximum is disconnected with 0x93.
func TestClientExceedingReceiveMaximum(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.ReceiveMaximum = 2
	n := brokertest.Start(t, cfg)
	p, ack := rawConnect(t, n, connect5("p", true, 0))
	if ack.Props.ReceiveMaximum != 2 {
		t.Fatalf("CONNACK %s", packet.Describe(ack))
	}
	// QoS 2 flows stay open until PUBREL: three of them exceed 2.
	p.Send(pub("a", 2, 1, "1"))
	p.Send(pub("a", 2, 2, "2"))
	p.ExpectAck(packet.PUBREC, 1)
	p.ExpectAck(packet.PUBREC, 2)
	p.Send(pub("a", 2, 3, "3"))
	p.ExpectDisconnect(packet.ReceiveMaximumExceeded)
}

// TestV311PublisherBeyondReceiveMaximumIsThrottledNotStuck: a 3.1.1 client
// has no Receive Maximum to respect; the broker stops reading while it has
// receive-maximum flows open, but a QoS 2 flow waits for the client's PUBREL,
// so the broker must keep reading to let it finish.
func TestV311PublisherBeyondReceiveMaximumIsThrottledNotStuck(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.ReceiveMaximum = 2
	n := brokertest.Start(t, cfg)
	p, _ := rawConnect(t, n, connect3("p", true))
	const total = 5
	for i := 1; i <= total; i++ {
		p.Send(pub("a", 2, uint16(i), fmt.Sprint(i)))
	}
	for i := 1; i <= total; i++ {
		p.ExpectAck(packet.PUBREC, uint16(i))
		p.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: uint16(i)})
	}
	for i := 1; i <= total; i++ {
		p.ExpectAck(packet.PUBCOMP, uint16(i))
	}

	// The same with a real 3.1.1 client publishing asynchronously.
	s := n.ConnectV3("s", true, nil)
	brokertest.Wait(t, s.Subscribe("b", 2, nil), "subscribe")
	c := n.ConnectV3("c", true, nil)
	var toks []pahov3.Token
	for i := 0; i < 20; i++ {
		toks = append(toks, c.Publish("b", 2, false, fmt.Sprint(i)))
	}
	for i, tok := range toks {
		brokertest.Wait(t, tok, fmt.Sprint("publish ", i))
	}
	for i := 0; i < 20; i++ {
		if m := s.Next(); string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("got %q, want %d", m.Payload(), i)
		}
	}
}

// TestLargeMessagesAndFanOut: a message near the maximum packet size goes
// through intact at each QoS; a message reaches 100 subscribers once each.
func TestLargeMessagesAndFanOut(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s := v5(n, "s")
	s.Sub("big", 2)
	p := v5(n, "p")
	payload := make([]byte, 1<<20-100)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for q := byte(0); q <= 2; q++ {
		ctx, cancel := ctx5()
		if _, err := p.Publish(ctx, &paho.Publish{Topic: "big", QoS: q, Payload: payload}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if m := s.Next(); !bytes.Equal(m.Payload, payload) || m.QoS != q {
			t.Fatalf("QoS %d: got %d bytes at QoS %d", q, len(m.Payload), m.QoS)
		}
	}

	var subs []*brokertest.Raw
	for i := 0; i < 100; i++ {
		r, _ := rawConnect(t, n, connect5(fmt.Sprint("fan", i), true, 0))
		r.Subscribe(1, sub("fan/+", 1))
		subs = append(subs, r)
	}
	rp, _ := rawConnect(t, n, connect5("rp", true, 0))
	publishAcked(t, rp, 1, pub("fan/out", 1, 0, "all"))
	for i, r := range subs {
		got := drain(t, r)
		if len(got) != 1 || string(got[0].Payload) != "all" {
			t.Fatalf("subscriber %d got %d messages", i, len(got))
		}
	}
}
