package broker_test

import (
	"bufio"
	"fmt"
	"net"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// BenchmarkSequencedPersistent measures the delivery of a sequenced
// group's records (DeliverSequenced, as the node's feed calls it) to a
// persistent session over loopback TCP, 64-byte payloads, the client
// completing every flow: window 1 is one record at a time (ns/op is the
// latency from the feed to the client's socket), window 256 keeps that
// many outstanding (ns/op is the cost per record). The session's writes go
// to the node's store with the fsync mode named; each delivery waits for
// them to be durable (docs/design/sequenced.md).
func BenchmarkSequencedPersistent(b *testing.B) {
	for _, fsync := range []string{"never", "always"} {
		for _, qos := range []byte{1, 2} {
			for _, window := range []int{1, 256} {
				b.Run(fmt.Sprintf("fsync=%s/qos%d/window%d", fsync, qos, window), func(b *testing.B) {
					benchSequencedPersistent(b, fsync, qos, window)
				})
			}
		}
	}
}

func benchSequencedPersistent(b *testing.B, fsync string, qos byte, window int) {
	cfg := brokertest.Config(b)
	cfg.Fsync = fsync
	cfg.MaxInflight = 1024
	n := brokertest.Start(b, cfg)
	c, err := net.Dial("tcp", n.MQTT())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	w := bufio.NewWriterSize(c, 64<<10)
	r := packet.NewReader(c, 0)
	r.SetVersion(packet.V5)
	send := func(p packet.Packet) error {
		bb, err := p.Append(nil, packet.V5)
		if err == nil {
			_, err = w.Write(bb)
		}
		return err
	}
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true, ClientID: "sub"}
	cp.Props.SetReceiveMaximum(65535)
	cp.Props.SetSessionExpiry(3600)
	_ = send(cp)
	_ = send(&packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: "g/#", QoS: qos}}})
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	for _, want := range []packet.Type{packet.CONNACK, packet.SUBACK} {
		p, err := r.Next()
		if err != nil || p.Type() != want {
			b.Fatalf("got %v (%v), want %v", p, err, want)
		}
	}

	slots := make(chan struct{}, window)
	done := make(chan error, 1)
	go func() {
		for got := 0; got < b.N; {
			p, err := r.Next()
			if err != nil {
				done <- err
				return
			}
			switch p := p.(type) {
			case *packet.Publish:
				got++
				<-slots
				kind := packet.PUBACK
				if p.QoS == 2 {
					kind = packet.PUBREC
				}
				err = send(&packet.Ack{Kind: kind, PacketID: p.PacketID})
			case *packet.Ack:
				if p.Kind == packet.PUBREL {
					err = send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID})
				}
			}
			if err == nil && r.Buffered() == 0 {
				err = w.Flush()
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	br := n.Broker()
	payload := make([]byte, 64)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		slots <- struct{}{}
		br.DeliverSequenced("grp", []*message.Message{{Topic: "g/a", Payload: payload, QoS: qos}}, []uint64{uint64(i)})
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}
