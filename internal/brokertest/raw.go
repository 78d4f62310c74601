package brokertest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// waitFor bounds every wait of a test helper on the node: long enough for a
// loaded CI machine, short enough that a hung test fails with a message.
const waitFor = 5 * time.Second

// Raw is a hand-driven MQTT client: it sends exactly the packets a test gives
// it and decodes every byte the broker sends with internal/mqtt/packet, so a
// test can see what real clients hide (packet ids, DUP, topic aliases, reason
// strings, the order of packets, the in-flight window).
type Raw struct {
	T    testing.TB
	Conn net.Conn
	V    packet.Version

	src  *gate
	in   chan packet.Packet // what the broker sent, in order
	held []packet.Packet    // received while waiting for something else
	done chan struct{}      // closed when the read side has ended
	err  error              // why it ended; read after done
}

// Raw opens a TCP connection to the node for a client of version v without
// sending anything.
func (n *Node) Raw(v packet.Version) *Raw {
	n.T.Helper()
	return NewRaw(n.T, n.Dial(), v)
}

// NewRaw wraps an open connection (TCP, WebSocket, ...) in a Raw client.
func NewRaw(t testing.TB, c net.Conn, v packet.Version) *Raw {
	r := &Raw{T: t, Conn: c, V: v, src: &gate{c: c}, in: make(chan packet.Packet, 1<<16), done: make(chan struct{})}
	go r.readLoop()
	t.Cleanup(func() { r.Resume(); _ = c.Close(); <-r.done })
	return r
}

// Pause stops reading from the socket (at most one packet already being
// read still arrives), as a client that stopped reading would: the
// broker's writes back up.
func (r *Raw) Pause() { r.src.pause() }

// Resume reads from the socket again.
func (r *Raw) Resume() { r.src.resume() }

// gate is the connection as the read loop sees it: reads wait while paused.
type gate struct {
	c  net.Conn
	mu sync.Mutex
	ch chan struct{} // non-nil while paused; closed on resume
}

func (g *gate) pause() {
	g.mu.Lock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *gate) resume() {
	g.mu.Lock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
	g.mu.Unlock()
}

func (g *gate) Read(b []byte) (int, error) {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return g.c.Read(b)
}

// RawConnect connects a Raw client with cp (its Version selects the protocol)
// and returns it with the CONNACK. It fails the test if no CONNACK comes.
func (n *Node) RawConnect(cp *packet.Connect) (*Raw, *packet.Connack) {
	n.T.Helper()
	if cp.Version == 0 {
		cp.Version = packet.V5
	}
	r := n.Raw(cp.Version)
	r.Send(cp)
	return r, Expect[*packet.Connack](r)
}

func (r *Raw) readLoop() {
	defer close(r.done)
	defer close(r.in)
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(r.src, hdr[:1]); err != nil {
			r.err = err
			return
		}
		n := 1
		rl, mul := 0, 1
		for {
			if _, err := io.ReadFull(r.src, hdr[n:n+1]); err != nil {
				r.err = err
				return
			}
			rl += int(hdr[n]&0x7f) * mul
			mul *= 128
			n++
			if hdr[n-1]&0x80 == 0 {
				break
			}
			if n == 5 {
				r.err = errors.New("brokertest: remaining length of more than four bytes")
				return
			}
		}
		b := make([]byte, n+rl)
		copy(b, hdr[:n])
		if _, err := io.ReadFull(r.src, b[n:]); err != nil {
			r.err = err
			return
		}
		p, _, err := packet.Decode(b, r.V)
		if err != nil {
			r.err = err
			return
		}
		r.in <- p
	}
}

// Send encodes and writes p, failing the test if it cannot.
func (r *Raw) Send(p packet.Packet) {
	r.T.Helper()
	b, err := p.Append(nil, r.V)
	if err != nil {
		r.T.Fatalf("brokertest: encode %s: %v", packet.Describe(p), err)
	}
	if err := r.SendBytes(b); err != nil {
		r.T.Fatalf("brokertest: send %s: %v", packet.Describe(p), err)
	}
}

// SendBytes writes b as it is and returns the write error, if any.
func (r *Raw) SendBytes(b []byte) error {
	_ = r.Conn.SetWriteDeadline(time.Now().Add(waitFor))
	_, err := r.Conn.Write(b)
	return err
}

// TryRecv returns the next packet the broker sent, or nil once the
// connection has ended and everything sent before was read. It fails the
// test if nothing comes within the wait bound.
func (r *Raw) TryRecv() packet.Packet {
	r.T.Helper()
	if len(r.held) > 0 {
		p := r.held[0]
		r.held = r.held[1:]
		return p
	}
	t := time.NewTimer(waitFor)
	defer t.Stop()
	select {
	case p, ok := <-r.in:
		if !ok {
			return nil
		}
		return p
	case <-t.C:
		r.T.Fatalf("brokertest: no packet from the broker within %v", waitFor)
		return nil
	}
}

// Available returns the packets already received, without waiting.
func (r *Raw) Available() []packet.Packet {
	out := r.held
	r.held = nil
	for {
		select {
		case p, ok := <-r.in:
			if !ok {
				return out
			}
			out = append(out, p)
		default:
			return out
		}
	}
}

// RecvWithin returns the next packet, or nil if none comes within d or the
// connection has ended.
func (r *Raw) RecvWithin(d time.Duration) packet.Packet {
	if len(r.held) > 0 {
		p := r.held[0]
		r.held = r.held[1:]
		return p
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case p := <-r.in:
		return p
	case <-t.C:
		return nil
	}
}

// Recv returns the next packet the broker sent; it fails the test if the
// connection ends first.
func (r *Raw) Recv() packet.Packet {
	r.T.Helper()
	p := r.TryRecv()
	if p == nil {
		r.T.Fatalf("brokertest: connection ended (%v) while a packet was expected", r.err)
	}
	return p
}

// Expect returns the next packet, failing the test unless it is a T.
func Expect[T packet.Packet](r *Raw) T {
	r.T.Helper()
	p := r.Recv()
	v, ok := p.(T)
	if !ok {
		var zero T
		r.T.Fatalf("brokertest: expected %T, got %s", zero, packet.Describe(p))
	}
	return v
}

// ExpectPublish receives the next packet and fails the test unless it is a
// PUBLISH of payload on topic.
func (r *Raw) ExpectPublish(topic, payload string) *packet.Publish {
	r.T.Helper()
	p := Expect[*packet.Publish](r)
	if p.Topic != topic || string(p.Payload) != payload {
		r.T.Fatalf("got %s, want PUBLISH %q %q", packet.Describe(p), topic, payload)
	}
	return p
}

// ExpectAck returns the next packet, failing the test unless it is an
// acknowledgement of kind k for packet id pid.
func (r *Raw) ExpectAck(k packet.Type, pid uint16) *packet.Ack {
	r.T.Helper()
	a := Expect[*packet.Ack](r)
	if a.Kind != k || a.PacketID != pid {
		r.T.Fatalf("brokertest: expected %v id %d, got %s", k, pid, packet.Describe(a))
	}
	return a
}

// Await returns the first packet of type T, keeping the packets received
// before it for later Recv calls.
func Await[T packet.Packet](r *Raw) T {
	r.T.Helper()
	var skipped []packet.Packet
	defer func() { r.held = append(skipped, r.held...) }()
	for {
		var p packet.Packet
		if len(r.held) > 0 {
			p, r.held = r.held[0], r.held[1:]
		} else {
			p = r.Recv()
		}
		if v, ok := p.(T); ok {
			return v
		}
		skipped = append(skipped, p)
	}
}

// Closed waits until the broker closes the connection and returns the
// packets it sent before closing (for example a final DISCONNECT).
func (r *Raw) Closed() []packet.Packet {
	r.T.Helper()
	var out []packet.Packet
	for {
		p := r.TryRecv()
		if p == nil {
			return out
		}
		out = append(out, p)
	}
}

// ExpectDisconnect waits for the connection to end and checks that the last
// packet before the end was DISCONNECT with code. It returns the DISCONNECT.
func (r *Raw) ExpectDisconnect(code packet.ReasonCode) *packet.Disconnect {
	r.T.Helper()
	got := r.Closed()
	if len(got) == 0 {
		r.T.Fatalf("brokertest: connection closed without DISCONNECT %v", code)
	}
	d, ok := got[len(got)-1].(*packet.Disconnect)
	if !ok || d.ReasonCode != code {
		r.T.Fatalf("brokertest: expected DISCONNECT %v before close, got %s", code, packet.Describe(got[len(got)-1]))
	}
	return d
}

// ExpectClosedSilently waits for the connection to end and fails the test if
// the broker sent anything before closing (3.1.1 has no DISCONNECT from the
// server).
func (r *Raw) ExpectClosedSilently() {
	r.T.Helper()
	if got := r.Closed(); len(got) > 0 {
		r.T.Fatalf("brokertest: expected a silent close, got %s", packet.Describe(got[0]))
	}
}

// Subscribe sends SUBSCRIBE with id pid and waits for its SUBACK; packets
// that arrive meanwhile (retained messages) are kept for Recv.
func (r *Raw) Subscribe(pid uint16, subs ...packet.Subscription) *packet.Suback {
	r.T.Helper()
	return r.SubscribeProps(pid, packet.Properties{}, subs...)
}

// SubscribeProps is Subscribe with SUBSCRIBE properties (a subscription id).
func (r *Raw) SubscribeProps(pid uint16, props packet.Properties, subs ...packet.Subscription) *packet.Suback {
	r.T.Helper()
	r.Send(&packet.Subscribe{PacketID: pid, Props: props, Subs: subs})
	sa := Await[*packet.Suback](r)
	if sa.PacketID != pid {
		r.T.Fatalf("brokertest: SUBACK for id %d, want %d", sa.PacketID, pid)
	}
	return sa
}

// Ping sends PINGREQ and waits for PINGRESP; it returns what arrived before
// it. Responses leave the broker in request order, so everything the broker
// had answered before reading the PINGREQ is in the returned slice.
func (r *Raw) Ping() []packet.Packet {
	r.T.Helper()
	r.Send(&packet.Pingreq{})
	var before []packet.Packet
	for {
		p := r.Recv()
		if _, ok := p.(*packet.Pingresp); ok {
			return before
		}
		before = append(before, p)
	}
}

// Close closes the connection without DISCONNECT (an abnormal end).
func (r *Raw) Close() {
	r.Resume()
	_ = r.Conn.Close()
	<-r.done
}
