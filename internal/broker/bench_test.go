package broker_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// rawClient is a minimal MQTT 5 client on our codec, fast enough that the
// benchmark measures the broker rather than the client.
type rawClient struct {
	c net.Conn
	w *bufio.Writer
	r *packet.Reader
}

func dialRaw(tb testing.TB, addr, id string) *rawClient {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	rc := &rawClient{c: c, w: bufio.NewWriterSize(c, 64<<10), r: packet.NewReader(c, 0)}
	rc.r.SetVersion(packet.V5)
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true, ClientID: id}
	cp.Props.SetReceiveMaximum(65535)
	rc.send(tb, cp)
	rc.flush(tb)
	p, err := rc.r.Next()
	if err != nil {
		tb.Fatal(err)
	}
	if ack, ok := p.(*packet.Connack); !ok || ack.ReasonCode != packet.Success {
		tb.Fatalf("connect: %v", packet.Describe(p))
	}
	return rc
}

func (rc *rawClient) send(tb testing.TB, p packet.Packet) {
	b, err := p.Append(nil, packet.V5)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := rc.w.Write(b); err != nil {
		tb.Fatal(err)
	}
}

func (rc *rawClient) flush(tb testing.TB) {
	if err := rc.w.Flush(); err != nil {
		tb.Fatal(err)
	}
}

func (rc *rawClient) expect(tb testing.TB, t packet.Type) packet.Packet {
	tb.Helper()
	p, err := rc.r.Next()
	if err != nil {
		tb.Fatal(err)
	}
	if p.Type() != t {
		tb.Fatalf("got %s, want type %d", packet.Describe(p), t)
	}
	return p
}

// BenchmarkPublishDeliver measures one publisher to one subscriber through
// a node over loopback TCP, 64-byte payloads. ns/op is per delivered message.
func BenchmarkPublishDeliver(b *testing.B) {
	for _, qos := range []byte{0, 1} {
		b.Run(fmt.Sprintf("qos%d", qos), func(b *testing.B) {
			addr := os.Getenv("SEXTANT_BENCH_BROKER") // an external broker to measure instead
			if addr == "" {
				cfg := brokertest.Config(b)
				cfg.MaxInflight = 1024
				addr = brokertest.Start(b, cfg).MQTT()
			}
			sub := dialRaw(b, addr, "sub")
			sub.send(b, &packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: "bench/t", QoS: qos}, {Filter: "bench/end", QoS: 1}}})
			sub.flush(b)
			sub.expect(b, packet.SUBACK)
			pub := dialRaw(b, addr, "pub")
			payload := make([]byte, 64)

			var wg sync.WaitGroup
			errs := make(chan error, 2)
			// Subscriber: count deliveries, acknowledge QoS 1 in batches. A
			// QoS 0 run ends with a QoS 1 marker, since the broker may drop
			// QoS 0 messages when the subscriber falls behind.
			delivered := 0
			wg.Add(1)
			go func() {
				defer wg.Done()
				for got := 0; got < b.N; {
					p, err := sub.r.Next()
					if err != nil {
						errs <- err
						return
					}
					pp, ok := p.(*packet.Publish)
					if !ok {
						continue
					}
					if pp.Topic == "bench/end" {
						ack := packet.Ack{Kind: packet.PUBACK, PacketID: pp.PacketID}
						bb, _ := ack.Append(nil, packet.V5)
						_, _ = sub.w.Write(bb)
						_ = sub.w.Flush()
						return
					}
					got++
					delivered++
					if pp.QoS == 1 {
						ack := packet.Ack{Kind: packet.PUBACK, PacketID: pp.PacketID}
						bb, _ := ack.Append(nil, packet.V5)
						_, _ = sub.w.Write(bb)
						if sub.r.Buffered() == 0 || got == b.N {
							_ = sub.w.Flush()
						}
					}
				}
			}()
			// Publisher acks reader (QoS 1): a window of 1000 outstanding.
			window := make(chan struct{}, 1000)
			if qos == 1 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < b.N; i++ {
						if _, err := pub.r.Next(); err != nil {
							errs <- err
							return
						}
						<-window
					}
				}()
			}
			b.SetBytes(64)
			b.ResetTimer()
			var pid uint16
			for i := 0; i < b.N; i++ {
				p := &packet.Publish{Topic: "bench/t", QoS: qos, Payload: payload}
				if qos == 1 {
					select {
					case window <- struct{}{}:
					default:
						pub.flush(b)
						window <- struct{}{}
					}
					pid++
					if pid == 0 {
						pid = 1
					}
					p.PacketID = pid
				}
				pub.send(b, p)
			}
			if qos == 0 {
				pub.send(b, &packet.Publish{Topic: "bench/end", QoS: 1, PacketID: 1})
			}
			pub.flush(b)
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(delivered)/float64(b.N), "delivered/op")
			select {
			case err := <-errs:
				if err != io.EOF {
					b.Fatal(err)
				}
			default:
			}
			pub.c.Close()
			sub.c.Close()
		})
	}
}
