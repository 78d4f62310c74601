package broker_test

import (
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

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
			sub := brokertest.DialPipe(b, addr, "sub")
			sub.Send(b, &packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: "bench/t", QoS: qos}, {Filter: "bench/end", QoS: 1}}})
			sub.Flush(b)
			sub.Expect(b, packet.SUBACK)
			pub := brokertest.DialPipe(b, addr, "pub")
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
					p, err := sub.R.Next()
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
						_, _ = sub.W.Write(bb)
						_ = sub.W.Flush()
						return
					}
					got++
					delivered++
					if pp.QoS == 1 {
						ack := packet.Ack{Kind: packet.PUBACK, PacketID: pp.PacketID}
						bb, _ := ack.Append(nil, packet.V5)
						_, _ = sub.W.Write(bb)
						if sub.R.Buffered() == 0 || got == b.N {
							_ = sub.W.Flush()
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
						if _, err := pub.R.Next(); err != nil {
							errs <- err
							return
						}
						<-window
					}
				}()
			}
			b.SetBytes(64)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := &packet.Publish{Topic: "bench/t", QoS: qos, Payload: payload}
				pub.Publish(b, p, window)
			}
			if qos == 0 {
				pub.Send(b, &packet.Publish{Topic: "bench/end", QoS: 1, PacketID: 1})
			}
			pub.Flush(b)
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
			pub.C.Close()
			sub.C.Close()
		})
	}
}
