// Package mqttclienttest is a tiny MQTT broker for tests of clients and of
// the load generator: it speaks 3.1.1 and 5.0 with our codec, routes
// publishes to matching subscriptions, and can misbehave on purpose (drop,
// duplicate or reorder deliveries, ignore pings, refuse connections) so that
// tests can check that the tools notice. It is imported only by tests.
//
// It is deliberately simple: no sessions survive a connection, no retained
// messages, no wills, no flow control; every connection has one goroutine
// reading and writes happen under a per-connection mutex.
package mqttclienttest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/topic"
)

// Faults make the broker misbehave. Delivery counts are over all PUBLISH
// packets the broker forwards to subscribers, starting at 1.
type Faults struct {
	DropEvery    int  // drop every Nth delivery
	Duplicate    int  // send the Nth delivery twice
	SwapAfter    int  // hold back delivery N and send it after delivery N+1
	IgnorePing   bool // never answer PINGREQ
	RefuseCode   packet.ReasonCode
	ReceiveMax   uint16 // announced in an MQTT 5 CONNACK when non-zero
	TopicAliases uint16 // Topic Alias Maximum announced in an MQTT 5 CONNACK
}

// Broker is a running fake broker.
type Broker struct {
	t      testing.TB
	ln     net.Listener
	faults Faults
	wg     sync.WaitGroup

	deliveries atomic.Int64
	pings      atomic.Int64

	mu struct {
		sync.Mutex
		conns map[*conn]struct{}
		held  *heldDelivery
	}
}

type heldDelivery struct {
	to *conn
	p  packet.Publish
}

type conn struct {
	b       *Broker
	nc      net.Conn
	version packet.Version
	wmu     sync.Mutex
	nextID  uint16
	subs    []packet.Subscription // guarded by b.mu
	aliases map[uint16]string     // reader goroutine only
}

// Start starts a broker on a loopback port; it stops when the test ends.
func Start(t testing.TB, f Faults) *Broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mqttclienttest: listen: %v", err)
	}
	b := &Broker{t: t, ln: ln, faults: f}
	b.mu.conns = map[*conn]struct{}{}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.Close)
	return b
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.ln.Addr().String() }

// Pings is the number of PINGREQ packets received.
func (b *Broker) Pings() int64 { return b.pings.Load() }

// Close stops the broker and closes every connection.
func (b *Broker) Close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for c := range b.mu.conns {
		_ = c.nc.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *Broker) accept() {
	defer b.wg.Done()
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			return
		}
		c := &conn{b: b, nc: nc}
		b.mu.Lock()
		b.mu.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go c.serve()
	}
}

func (c *conn) serve() {
	defer c.b.wg.Done()
	defer func() {
		c.b.mu.Lock()
		delete(c.b.mu.conns, c)
		c.b.mu.Unlock()
		_ = c.nc.Close()
	}()
	r := packet.NewReader(c.nc, 0)
	for {
		p, err := r.Next()
		if err != nil {
			return
		}
		if !c.handle(p) {
			return
		}
	}
}

func (c *conn) send(p packet.Packet) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := p.Append(nil, c.version)
	if err != nil {
		c.b.t.Errorf("mqttclienttest: encode %s: %v", packet.Describe(p), err)
		return
	}
	_, _ = c.nc.Write(b)
}

func (c *conn) handle(p packet.Packet) bool {
	f := &c.b.faults
	switch p := p.(type) {
	case *packet.Connect:
		c.version = p.Version
		ack := &packet.Connack{ReasonCode: f.RefuseCode}
		if c.version == packet.V5 {
			if f.ReceiveMax > 0 {
				ack.Props.SetReceiveMaximum(f.ReceiveMax)
			}
			if f.TopicAliases > 0 {
				ack.Props.SetTopicAliasMaximum(f.TopicAliases)
			}
			if p.ClientID == "" {
				ack.Props.SetAssignedClientID("fake-assigned")
			}
		} else if f.RefuseCode.IsError() {
			ack.ReasonCode = packet.NotAuthorized
		}
		c.send(ack)
		return !f.RefuseCode.IsError()
	case *packet.Publish:
		if p.Props.Has(packet.PropTopicAlias) {
			if c.aliases == nil {
				c.aliases = map[uint16]string{}
			}
			if p.Topic != "" {
				c.aliases[p.Props.TopicAlias] = p.Topic
			} else {
				p.Topic = c.aliases[p.Props.TopicAlias]
			}
			p.Props.Unmark(packet.PropTopicAlias)
		}
		switch p.QoS {
		case 1:
			c.send(&packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID})
		case 2:
			c.send(&packet.Ack{Kind: packet.PUBREC, PacketID: p.PacketID})
		}
		c.b.route(p)
	case *packet.Ack:
		switch p.Kind {
		case packet.PUBREL:
			c.send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID})
		case packet.PUBREC:
			c.send(&packet.Ack{Kind: packet.PUBREL, PacketID: p.PacketID})
		}
	case *packet.Subscribe:
		codes := make([]packet.ReasonCode, len(p.Subs))
		c.b.mu.Lock()
		for i, s := range p.Subs {
			if topic.ValidateFilter(s.Filter) != nil {
				codes[i] = packet.TopicFilterInvalid
				continue
			}
			c.subs = append(c.subs, s)
			codes[i] = packet.ReasonCode(s.QoS)
		}
		c.b.mu.Unlock()
		c.send(&packet.Suback{PacketID: p.PacketID, Codes: codes})
	case *packet.Unsubscribe:
		codes := make([]packet.ReasonCode, len(p.Filters))
		c.b.mu.Lock()
		for i, flt := range p.Filters {
			codes[i] = packet.NoSubscriptionExisted
			for j, s := range c.subs {
				if s.Filter == flt {
					c.subs = append(c.subs[:j], c.subs[j+1:]...)
					codes[i] = packet.Success
					break
				}
			}
		}
		c.b.mu.Unlock()
		c.send(&packet.Unsuback{PacketID: p.PacketID, Codes: codes})
	case *packet.Pingreq:
		c.b.pings.Add(1)
		if !f.IgnorePing {
			c.send(&packet.Pingresp{})
		}
	case *packet.Disconnect:
		return false
	default:
		c.b.t.Errorf("mqttclienttest: unexpected %s", packet.Describe(p))
		return false
	}
	return true
}

// route forwards p to every connection with a matching subscription,
// applying the faults.
func (b *Broker) route(p *packet.Publish) {
	type target struct {
		c   *conn
		qos byte
	}
	var targets []target
	b.mu.Lock()
	for c := range b.mu.conns {
		for _, s := range c.subs {
			if topic.Match(s.Filter, p.Topic) {
				targets = append(targets, target{c, min(s.QoS, p.QoS)})
				break
			}
		}
	}
	b.mu.Unlock()
	f := &b.faults
	for _, t := range targets {
		n := int(b.deliveries.Add(1))
		out := packet.Publish{Topic: p.Topic, QoS: t.qos, Payload: append([]byte(nil), p.Payload...)}
		if t.c.version == packet.V5 {
			out.Props.User = append([]packet.UserProperty(nil), p.Props.User...)
		}
		switch {
		case f.DropEvery > 0 && n%f.DropEvery == 0:
			continue
		case f.SwapAfter > 0 && n == f.SwapAfter:
			b.mu.Lock()
			b.mu.held = &heldDelivery{to: t.c, p: out}
			b.mu.Unlock()
			continue
		}
		t.c.deliver(out)
		if f.Duplicate > 0 && n == f.Duplicate {
			t.c.deliver(out)
		}
		b.mu.Lock()
		h := b.mu.held
		if h != nil && n == f.SwapAfter+1 {
			b.mu.held = nil
		} else {
			h = nil
		}
		b.mu.Unlock()
		if h != nil {
			h.to.deliver(h.p)
		}
	}
}

func (c *conn) deliver(p packet.Publish) {
	if p.QoS > 0 {
		c.wmu.Lock()
		c.nextID++
		if c.nextID == 0 {
			c.nextID = 1
		}
		p.PacketID = c.nextID
		c.wmu.Unlock()
	}
	c.send(&p)
}
