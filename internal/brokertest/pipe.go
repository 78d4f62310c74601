package brokertest

import (
	"bufio"
	"net"
	"testing"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Pipe is a minimal MQTT 5 client for benchmarks: batched writes, the
// codec's Reader on the reading side, no goroutines of its own, so that a
// benchmark measures the broker rather than its client.
type Pipe struct {
	C net.Conn
	W *bufio.Writer
	R *packet.Reader

	lastID uint16 // packet id of the last QoS 1/2 Publish
}

// DialPipe connects to addr with client id id (clean start, the largest
// Receive Maximum) and waits for a successful CONNACK.
func DialPipe(tb testing.TB, addr, id string) *Pipe {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	p := &Pipe{C: c, W: bufio.NewWriterSize(c, 64<<10), R: packet.NewReader(c, 0)}
	p.R.SetVersion(packet.V5)
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true, ClientID: id}
	cp.Props.SetReceiveMaximum(65535)
	p.Send(tb, cp)
	p.Flush(tb)
	if ack, ok := p.Expect(tb, packet.CONNACK).(*packet.Connack); !ok || ack.ReasonCode != packet.Success {
		tb.Fatalf("brokertest: connect %s refused", id)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return p
}

// Send buffers one packet.
func (p *Pipe) Send(tb testing.TB, pk packet.Packet) {
	b, err := pk.Append(nil, packet.V5)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := p.W.Write(b); err != nil {
		tb.Fatal(err)
	}
}

// Publish buffers pub. A QoS 1/2 publish first takes a slot in window (a
// channel whose capacity is the in-flight window; whoever reads the
// acknowledgements frees one per PUBACK), flushing if none is free, and
// gets the next packet id.
func (p *Pipe) Publish(tb testing.TB, pub *packet.Publish, window chan struct{}) {
	if pub.QoS > 0 {
		select {
		case window <- struct{}{}:
		default:
			p.Flush(tb)
			window <- struct{}{}
		}
		p.lastID++
		if p.lastID == 0 {
			p.lastID = 1
		}
		pub.PacketID = p.lastID
	}
	p.Send(tb, pub)
}

// Flush writes what is buffered.
func (p *Pipe) Flush(tb testing.TB) {
	if err := p.W.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// Ack buffers the PUBACK of a received QoS 1 PUBLISH; errors surface at the
// next Flush.
func (p *Pipe) Ack(pub *packet.Publish) {
	b, _ := (&packet.Ack{Kind: packet.PUBACK, PacketID: pub.PacketID}).Append(nil, packet.V5)
	_, _ = p.W.Write(b)
}

// Expect reads the next packet and fails unless it has type t.
func (p *Pipe) Expect(tb testing.TB, t packet.Type) packet.Packet {
	tb.Helper()
	pk, err := p.R.Next()
	if err != nil {
		tb.Fatal(err)
	}
	if pk.Type() != t {
		tb.Fatalf("brokertest: got %s, want %s", packet.Describe(pk), t)
	}
	return pk
}
