package broker_test

import (
	"fmt"
	"net"
	"runtime"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// BenchmarkIdleConnectionMemory reports the broker memory an idle MQTT 5
// connection with one subscription costs, split into heap and goroutine
// stacks (b.N is ignored: it opens 2,000 connections once).
func BenchmarkIdleConnectionMemory(b *testing.B) {
	const conns = 2000
	cfg := brokertest.Config(b)
	cfg.MaxConnections = conns + 10
	n := brokertest.Start(b, cfg)
	measure := func() (heap, stack uint64) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse, ms.StackInuse
	}
	h0, s0 := measure()
	clients := make([]net.Conn, 0, conns)
	for i := 0; i < conns; i++ {
		rc := brokertest.DialPipe(b, n.MQTT(), fmt.Sprintf("idle-%05d", i))
		rc.Send(b, &packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: fmt.Sprintf("devices/%05d/cmd", i), QoS: 1}}})
		rc.Flush(b)
		rc.Expect(b, packet.SUBACK)
		clients = append(clients, rc.C)
	}
	h1, s1 := measure()
	b.ReportMetric(float64(runtime.NumGoroutine())/conns, "goroutines/conn")
	// The raw clients keep only their net.Conn (a few hundred bytes each),
	// so nearly all of this is the broker's: session, connection, read
	// buffer, subscription and the reader goroutine's stack.
	b.ReportMetric(float64(h1-h0)/conns, "heap-B/conn")
	b.ReportMetric(float64(s1-s0)/conns, "stack-B/conn")
	for _, c := range clients {
		c.Close()
	}
}
