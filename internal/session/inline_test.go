package session

import (
	"encoding/binary"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// routeHub is the smallest broker that routes: exact topics, deliveries
// made from the publisher's goroutine with the publisher in Persist.From, as
// the broker does. It has no back-pressure (its tests publish QoS 0 or stay
// within the queue).
type routeHub struct {
	env    *Env
	expiry uint32 // of the sessions it creates
	mu     struct {
		sync.Mutex
		sessions map[string]*Session
		subs     map[string][]*Session
		granted  map[*Session]byte
	}
}

func newRouteHub(env *Env) *routeHub {
	h := &routeHub{env: env}
	h.mu.sessions = map[string]*Session{}
	h.mu.subs = map[string][]*Session{}
	h.mu.granted = map[*Session]byte{}
	env.Hub = h
	return h
}

func (h *routeHub) Attach(c *Conn, p *packet.Connect) (*Session, bool, packet.ReasonCode, string) {
	s := New(p.ClientID, h.env, p.Version, h.expiry)
	s.Bind(c)
	h.mu.Lock()
	h.mu.sessions[p.ClientID] = s
	h.mu.Unlock()
	return s, false, packet.Success, ""
}

func (h *routeHub) Publish(from *Session, m *message.Message, ack Acker) {
	h.mu.Lock()
	targets := append([]*Session(nil), h.mu.subs[m.Topic]...)
	qos := make([]byte, len(targets))
	for i, s := range targets {
		qos[i] = h.mu.granted[s]
	}
	h.mu.Unlock()
	ps := Persist{From: from}
	for i, s := range targets {
		if out, _ := s.Deliver(Delivery{Msg: m, QoS: min(m.QoS, qos[i])}, &ps); out == Full {
			panic("routeHub: a queue filled up (its tests must not)")
		}
	}
	if ack != nil {
		ack.Ack(packet.Success)
	}
}

func (h *routeHub) Subscribe(s *Session, reqs []SubRequest, done func([]packet.ReasonCode)) {
	codes := make([]packet.ReasonCode, len(reqs))
	h.mu.Lock()
	for i, r := range reqs {
		h.mu.subs[r.Filter] = append(h.mu.subs[r.Filter], s)
		h.mu.granted[s] = r.Opts.QoS
		codes[i] = packet.ReasonCode(r.Opts.QoS)
	}
	h.mu.Unlock()
	done(codes)
}

func (h *routeHub) Unsubscribe(_ *Session, f []string, done func([]packet.ReasonCode)) {
	done(make([]packet.ReasonCode, len(f)))
}

func (h *routeHub) Detach(s *Session, c *Conn, _ bool) { s.Unbind(c) }

func (h *routeHub) session(id string) *Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.sessions[id]
}

// testNode serves sessions over loopback TCP on a manual clock (so a
// writer goroutine, once started, lingers until the test advances it).
type testNode struct {
	t     *testing.T
	clk   *clocktest.Manual
	env   *Env
	hub   *routeHub
	ln    net.Listener
	conns chan *net.TCPConn // the broker's side of each accepted connection
}

func startTestNode(t *testing.T, lim Limits) *testNode {
	t.Helper()
	clk := clocktest.New(time.Now())
	env := &Env{Clock: clk, Log: slog.New(slog.DiscardHandler), Metrics: metrics.NewNode(), Limits: lim}
	n := &testNode{t: t, clk: clk, env: env, hub: newRouteHub(env), conns: make(chan *net.TCPConn, 16)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.ln = ln
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.conns <- c.(*net.TCPConn)
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return n
}

func testLimits() Limits {
	return Limits{
		MaxPacketSize: 1 << 20, ReceiveMaximum: 100, MaxInflight: 100, MaxQueued: 1000, MaxStored: 1000,
		MaxTopicLength: 100, MaxTopicLevels: 10, MaxClientIDLength: 100,
		ConnectTimeout: time.Minute, WriteTimeout: time.Minute, SlowConsumer: time.Minute,
	}
}

// client is a test client: a socket and a packet reader.
type client struct {
	t  *testing.T
	c  *net.TCPConn
	r  *packet.Reader
	sc *net.TCPConn // the broker's side of the connection
}

// connect dials, lets setup adjust both sides' sockets before anything is
// sent (nil: nothing), starts serving, and completes CONNECT.
func (n *testNode) connect(id string, setup func(client, server *net.TCPConn)) *client {
	n.t.Helper()
	c, err := net.Dial("tcp", n.ln.Addr().String())
	if err != nil {
		n.t.Fatal(err)
	}
	sc := <-n.conns
	if setup != nil {
		setup(c.(*net.TCPConn), sc)
	}
	go Serve(sc, n.env, nil)
	cl := &client{t: n.t, c: c.(*net.TCPConn), r: packet.NewReader(c, 0), sc: sc}
	cl.r.SetVersion(packet.V5)
	n.t.Cleanup(func() { c.Close() })
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true, ClientID: id}
	cp.Props.SetReceiveMaximum(65535)
	cl.send(cp)
	if a, ok := cl.next().(*packet.Connack); !ok || a.ReasonCode != packet.Success {
		n.t.Fatalf("connect %s: %v", id, a)
	}
	return cl
}

func (cl *client) send(p packet.Packet) {
	cl.t.Helper()
	b, err := p.Append(nil, packet.V5)
	if err != nil {
		cl.t.Fatal(err)
	}
	if _, err := cl.c.Write(b); err != nil {
		cl.t.Fatal(err)
	}
}

func (cl *client) next() packet.Packet {
	cl.t.Helper()
	_ = cl.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	p, err := cl.r.Next()
	if err != nil {
		cl.t.Fatalf("read: %v", err)
	}
	return p
}

func (cl *client) subscribe(topic string, qos byte) {
	cl.t.Helper()
	cl.send(&packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: topic, QoS: qos}}})
	if _, ok := cl.next().(*packet.Suback); !ok {
		cl.t.Fatal("no SUBACK")
	}
}

// writerRunning reports whether the session's connection has a writer
// goroutine.
func writerRunning(s *Session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.conn != nil && s.mu.conn.w.running
}

// waitUntil polls cond (state that has no notification) for at most 10 s.
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s: %s", what)
		}
		<-tick.C
	}
}

// settle lets the writer goroutines the handshakes started linger out.
func (n *testNode) settle(ids ...string) {
	n.t.Helper()
	for _, id := range ids {
		s := n.hub.session(id)
		waitUntil(n.t, func() bool {
			n.clk.Advance(writerLinger) // again, for a timer set after the last advance
			return !writerRunning(s)
		}, "the writer of "+id+" exits after lingering")
	}
}

func seqPayload(i, size int) []byte {
	b := make([]byte, max(size, 4))
	binary.BigEndian.PutUint32(b, uint32(i))
	return b
}

// TestModerateTrafficIsWrittenInline: one message at a time (the everyday
// rate), each delivery and each acknowledgement is written by the
// publisher's reader itself: no writer goroutine runs for the subscriber or
// the publisher. On the manual clock a writer goroutine, once started,
// lingers until the clock moves, so a single hand-off would show.
func TestModerateTrafficIsWrittenInline(t *testing.T) {
	n := startTestNode(t, testLimits())
	sub := n.connect("sub", nil)
	sub.subscribe("t", 1)
	pub := n.connect("pub", nil)
	n.settle("sub", "pub")

	for i := 1; i <= 50; i++ {
		qos := byte(i % 2)
		p := &packet.Publish{Topic: "t", QoS: qos, Payload: seqPayload(i, 16)}
		if qos > 0 {
			p.PacketID = uint16(i)
		}
		pub.send(p)
		got, ok := sub.next().(*packet.Publish)
		if !ok || binary.BigEndian.Uint32(got.Payload) != uint32(i) {
			t.Fatalf("message %d: got %v", i, got)
		}
		if got.QoS > 0 {
			sub.send(&packet.Ack{Kind: packet.PUBACK, PacketID: got.PacketID})
			if a, ok := pub.next().(*packet.Ack); !ok || a.Kind != packet.PUBACK || a.PacketID != uint16(i) {
				t.Fatalf("message %d: publisher got %v", i, a)
			}
		}
		if writerRunning(n.hub.session("sub")) || writerRunning(n.hub.session("pub")) {
			t.Fatalf("message %d: a writer goroutine was started", i)
		}
	}
	// The subscriber's acknowledgements were read and its window emptied.
	s := n.hub.session("sub")
	waitUntil(t, func() bool { _, inflight, _ := s.Pending(); return inflight == 0 }, "the window empties")
}

// TestFullSocketFallsBackToTheWriter: a subscriber whose socket stops
// reading, with small socket buffers, makes the inline write find the socket
// full: what it could not write goes to the writer goroutine, which blocks,
// while another subscriber of the same messages gets every one in order and
// the publisher is never held back (QoS 0). When the stopped client reads
// again, its stream is intact: every packet decodes, in order, and the
// messages it lacks are the ones counted as dropped from its full queue.
func TestFullSocketFallsBackToTheWriter(t *testing.T) {
	lim := testLimits()
	lim.MaxQueued = 20
	n := startTestNode(t, lim)
	stuck := n.connect("stuck", func(c, s *net.TCPConn) {
		_ = c.SetReadBuffer(4096)
		_ = s.SetWriteBuffer(4096)
	})
	stuck.subscribe("t", 0)
	other := n.connect("other", nil)
	other.subscribe("t", 0)
	pub := n.connect("pub", nil)
	n.settle("stuck", "other", "pub")

	const total, size = 400, 2000
	for i := 1; i <= total; i++ {
		pub.send(&packet.Publish{Topic: "t", Payload: seqPayload(i, size)})
		got, ok := other.next().(*packet.Publish)
		if !ok || binary.BigEndian.Uint32(got.Payload) != uint32(i) {
			t.Fatalf("other subscriber, message %d: got %v", i, got)
		}
	}
	if !writerRunning(n.hub.session("stuck")) {
		t.Fatal("the stuck subscriber's writes never fell back to its writer goroutine")
	}
	dropped := testutil.ToFloat64(n.env.Metrics.Dropped[metrics.DropQueueFull])
	if dropped == 0 {
		t.Fatal("nothing was dropped for the stuck subscriber: its socket never filled")
	}

	// Read on: an intact stream of increasing sequence numbers, ending with
	// the last message, missing exactly the dropped ones.
	received, last := 0, uint32(0)
	for last != total {
		got, ok := stuck.next().(*packet.Publish)
		if !ok {
			t.Fatalf("stuck subscriber got %v", got)
		}
		seq := binary.BigEndian.Uint32(got.Payload)
		if seq <= last || len(got.Payload) != size {
			t.Fatalf("stuck subscriber: message %d (%d bytes) after %d", seq, len(got.Payload), last)
		}
		last = seq
		received++
	}
	if received+int(dropped) != total {
		t.Fatalf("stuck subscriber received %d and %v were dropped, of %d", received, dropped, total)
	}
}
