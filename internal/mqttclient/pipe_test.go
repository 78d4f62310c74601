package mqttclient_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// pipeServer is the broker end of a net.Pipe, scripted by the test. It runs
// inside a synctest bubble, so time is fake and waits are exact.
type pipeServer struct {
	t    *testing.T
	nc   net.Conn
	v    packet.Version
	recv chan packet.Packet
}

// startPipe connects a Client over net.Pipe to a scripted server that
// answers CONNECT with ack. Must run inside a synctest bubble.
func startPipe(t *testing.T, o mqttclient.Options, ack *packet.Connack) (*mqttclient.Client, *pipeServer) {
	t.Helper()
	cc, sc := net.Pipe()
	s := &pipeServer{t: t, nc: sc, v: o.Version, recv: make(chan packet.Packet, 1000)}
	if s.v == 0 {
		s.v = packet.V5
	}
	go func() {
		r := packet.NewReader(sc, 0)
		for {
			p, err := r.Next()
			if err != nil {
				close(s.recv)
				return
			}
			if _, ok := p.(*packet.Connect); ok {
				s.send(ack)
				continue
			}
			s.recv <- copyPacket(p)
		}
	}()
	c, err := mqttclient.Connect(context.Background(), cc, o)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(); sc.Close() })
	return c, s
}

func copyPacket(p packet.Packet) packet.Packet {
	switch p := p.(type) {
	case *packet.Publish:
		cp := *p
		cp.Payload = append([]byte(nil), p.Payload...)
		return &cp
	case *packet.Ack:
		cp := *p
		return &cp
	}
	return p
}

func (s *pipeServer) send(p packet.Packet) {
	b, err := p.Append(nil, s.v)
	if err != nil {
		s.t.Errorf("encode %s: %v", packet.Describe(p), err)
		return
	}
	if _, err := s.nc.Write(b); err != nil {
		s.t.Errorf("server write: %v", err)
	}
}

// drain returns what the server has received so far (call after synctest.Wait).
func (s *pipeServer) drain() []packet.Packet {
	var out []packet.Packet
	for {
		select {
		case p, ok := <-s.recv:
			if !ok {
				return out
			}
			out = append(out, p)
		default:
			return out
		}
	}
}

func count(ps []packet.Packet, typ packet.Type) int {
	n := 0
	for _, p := range ps {
		if p.Type() == typ {
			n++
		}
	}
	return n
}

func TestKeepAliveFailsWhenPingsGoUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := startPipe(t, mqttclient.Options{KeepAlive: 10 * time.Second}, &packet.Connack{})
		time.Sleep(7 * time.Second) // lint:sleep-ok fake time in a synctest bubble
		synctest.Wait()
		if got := count(s.drain(), packet.PINGREQ); got != 0 {
			t.Fatalf("%d pings before 3/4 of the interval", got)
		}
		time.Sleep(1 * time.Second) // lint:sleep-ok fake time
		synctest.Wait()
		if got := count(s.drain(), packet.PINGREQ); got != 1 {
			t.Fatalf("%d pings at 3/4 of the interval, want 1", got)
		}
		select {
		case <-c.Done():
			t.Fatal("connection ended before the ping was a whole interval old")
		default:
		}
		time.Sleep(10 * time.Second) // lint:sleep-ok fake time
		synctest.Wait()
		select {
		case <-c.Done():
		default:
			t.Fatal("connection still up after an unanswered ping")
		}
		if err := c.Err(); !errors.Is(err, mqttclient.ErrKeepAlive) || !errors.Is(err, mqttclient.ErrConnectionLost) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestKeepAliveSurvivesWhenPingsAreAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := startPipe(t, mqttclient.Options{KeepAlive: 4 * time.Second}, &packet.Connack{})
		pings := 0
		for range 10 {
			time.Sleep(3 * time.Second) // lint:sleep-ok fake time
			synctest.Wait()
			for _, p := range s.drain() {
				if p.Type() == packet.PINGREQ {
					pings++
					s.send(&packet.Pingresp{})
				}
			}
		}
		if c.Err() != nil {
			t.Fatalf("connection ended: %v", c.Err())
		}
		if pings < 9 {
			t.Fatalf("%d pings in 30s at keepalive 4s", pings)
		}
	})
}

func TestServerKeepAliveOverridesOurs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ack := &packet.Connack{}
		ack.Props.SetServerKeepAlive(2)
		c, _ := startPipe(t, mqttclient.Options{KeepAlive: 60 * time.Second}, ack)
		if c.Server().KeepAlive != 2*time.Second {
			t.Fatalf("keepalive %v", c.Server().KeepAlive)
		}
	})
}

func TestWindowRespectsReceiveMaximum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ack := &packet.Connack{}
		ack.Props.SetReceiveMaximum(3)
		c, s := startPipe(t, mqttclient.Options{}, ack)
		if c.Window() != 3 {
			t.Fatalf("window %d, want 3", c.Window())
		}
		done := make(chan error, 10)
		go func() {
			for range 5 {
				if err := c.PublishAsync(context.Background(), &packet.Publish{Topic: "w", QoS: 1}, func(err error) { done <- err }); err != nil {
					done <- err
				}
			}
		}()
		synctest.Wait()
		got := s.drain()
		if n := count(got, packet.PUBLISH); n != 3 {
			t.Fatalf("%d publishes on the wire with receive maximum 3", n)
		}
		s.send(&packet.Ack{Kind: packet.PUBACK, PacketID: got[0].(*packet.Publish).PacketID})
		synctest.Wait()
		if n := count(s.drain(), packet.PUBLISH); n != 1 {
			t.Fatalf("one acknowledgement released %d publishes", n)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestMaxInflightBelowReceiveMaximum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ack := &packet.Connack{}
		ack.Props.SetReceiveMaximum(100)
		c, _ := startPipe(t, mqttclient.Options{MaxInflight: 7}, ack)
		if c.Window() != 7 {
			t.Fatalf("window %d, want 7", c.Window())
		}
	})
}

func TestOutboundQoS2Exchange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := startPipe(t, mqttclient.Options{}, &packet.Connack{})
		res := make(chan error, 1)
		go func() {
			res <- c.Publish(context.Background(), &packet.Publish{Topic: "q2", QoS: 2, Payload: []byte("x")})
		}()
		synctest.Wait()
		got := s.drain()
		if len(got) != 1 || got[0].Type() != packet.PUBLISH {
			t.Fatalf("got %v", got)
		}
		id := got[0].(*packet.Publish).PacketID
		s.send(&packet.Ack{Kind: packet.PUBREC, PacketID: id})
		synctest.Wait()
		got = s.drain()
		if len(got) != 1 || got[0].Type() != packet.PUBREL || got[0].(*packet.Ack).PacketID != id {
			t.Fatalf("after PUBREC: %v", got)
		}
		select {
		case err := <-res:
			t.Fatalf("publish completed before PUBCOMP: %v", err)
		default:
		}
		s.send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: id})
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	})
}

func TestPubackWithErrorCodeFailsThePublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := startPipe(t, mqttclient.Options{}, &packet.Connack{})
		res := make(chan error, 1)
		go func() { res <- c.Publish(context.Background(), &packet.Publish{Topic: "q1", QoS: 1}) }()
		synctest.Wait()
		id := s.drain()[0].(*packet.Publish).PacketID
		ack := &packet.Ack{Kind: packet.PUBACK, PacketID: id, ReasonCode: packet.NotAuthorized}
		ack.Props.SetReasonString("no")
		s.send(ack)
		err := <-res
		var re *mqttclient.ReasonError
		if !errors.As(err, &re) || re.Code != packet.NotAuthorized || re.Reason != "no" {
			t.Fatalf("got %v", err)
		}
	})
}

func TestInboundQoS2DeliveredOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := make(inbox, 10)
		_, s := startPipe(t, mqttclient.Options{OnPublish: in.handler()}, &packet.Connack{})
		p := &packet.Publish{Topic: "in", QoS: 2, PacketID: 7, Payload: []byte("once")}
		s.send(p)
		p.Dup = true
		s.send(p)
		synctest.Wait()
		got := s.drain()
		if count(got, packet.PUBREC) != 2 {
			t.Fatalf("want two PUBRECs, got %v", got)
		}
		if len(in) != 1 {
			t.Fatalf("delivered %d times", len(in))
		}
		s.send(&packet.Ack{Kind: packet.PUBREL, PacketID: 7})
		synctest.Wait()
		got = s.drain()
		if len(got) != 1 || got[0].Type() != packet.PUBCOMP || got[0].(*packet.Ack).ReasonCode != packet.Success {
			t.Fatalf("after PUBREL: %v", got)
		}
		// The id is free again: a new message with it is a new message.
		p.Dup = false
		s.send(p)
		synctest.Wait()
		if len(in) != 2 {
			t.Fatalf("reused id not delivered")
		}
	})
}

func TestUnknownInboundAliasIsAProtocolError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mqttclient.Options{}
		o.Props.SetTopicAliasMaximum(2)
		c, s := startPipe(t, o, &packet.Connack{})
		p := &packet.Publish{}
		p.Props.SetTopicAlias(1)
		s.send(p)
		synctest.Wait()
		if err := c.Err(); !errors.Is(err, mqttclient.ErrProtocol) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestServerDisconnectCarriesReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := startPipe(t, mqttclient.Options{}, &packet.Connack{})
		d := &packet.Disconnect{ReasonCode: packet.UseAnotherServer}
		d.Props.SetServerReference("other:1883")
		s.send(d)
		synctest.Wait()
		var re *mqttclient.ReasonError
		if err := c.Err(); !errors.As(err, &re) || re.ServerReference != "other:1883" || !errors.Is(err, mqttclient.ErrConnectionLost) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCloseFailsWhatIsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := startPipe(t, mqttclient.Options{}, &packet.Connack{})
		res := make(chan error, 1)
		if err := c.PublishAsync(context.Background(), &packet.Publish{Topic: "x", QoS: 1}, func(err error) { res <- err }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c.Close()
		if err := <-res; !errors.Is(err, mqttclient.ErrClosed) {
			t.Fatalf("in-flight publish ended with %v", err)
		}
		if err := c.Publish(context.Background(), &packet.Publish{Topic: "x"}); !errors.Is(err, mqttclient.ErrClosed) {
			t.Fatalf("publish after close: %v", err)
		}
	})
}

func TestPublishBlocksWhenWriterIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cc, sc := net.Pipe() // nobody reads sc after CONNACK
		go func() {
			r := packet.NewReader(sc, 0)
			if _, err := r.Next(); err == nil {
				b, _ := (&packet.Connack{}).Append(nil, packet.V5)
				sc.Write(b)
			}
		}()
		c, err := mqttclient.Connect(context.Background(), cc, mqttclient.Options{MaxPending: 1024})
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var perr error
		for i := 0; i < 1000 && perr == nil; i++ {
			perr = c.PublishAsync(ctx, &packet.Publish{Topic: "x", Payload: make([]byte, 100)}, nil)
		}
		if !errors.Is(perr, context.DeadlineExceeded) {
			t.Fatalf("publishing into a stuck connection: %v", perr)
		}
	})
}

func TestV5ClientAgainstA311OnlyBroker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cc, sc := net.Pipe()
		defer sc.Close()
		go func() {
			r := packet.NewReader(sc, 0)
			if _, err := r.Next(); err == nil {
				// 3.1.1 CONNACK, return code 1: unacceptable protocol version.
				sc.Write([]byte{0x20, 0x02, 0x00, 0x01})
			}
		}()
		_, err := mqttclient.Connect(context.Background(), cc, mqttclient.Options{})
		if err == nil || !strings.Contains(err.Error(), "may not support MQTT 5") {
			t.Fatalf("got %v", err)
		}
	})
}
