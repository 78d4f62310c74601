package broker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// TestSubscriberThatStopsReadingWhileOthersContinue: a subscriber whose
// socket stops reading (its client reads nothing more) while others read
// on. At QoS 0 its full socket and then its full queue cost it messages,
// dropped and counted, and nobody else waits; at QoS 1 it holds the
// publisher back (back-pressure) until slow-consumer-timeout, is then
// disconnected as a slow consumer and counted, and the publisher's every
// message is acknowledged. The other subscriber gets everything, in order.
func TestSubscriberThatStopsReadingWhileOthersContinue(t *testing.T) {
	for _, qos := range []byte{0, 1} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			cfg := brokertest.Config(t)
			cfg.MaxQueuedMessages = 20
			cfg.MaxInflight = 400 // more in flight than the socket buffers hold: the socket fills first
			cfg.SlowConsumer = 300 * time.Millisecond
			n := brokertest.Start(t, cfg)

			cp := connect5("stuck", true, 0)
			cp.Props.SetReceiveMaximum(65535)
			stuck, _ := rawConnect(t, n, cp)
			stuck.Subscribe(1, sub("stall/t", qos))
			stuck.Pause()
			var other tally
			oc := dialClient(t, n, mqttclient.Options{Version: packet.V5, ClientID: "other", OnPublish: other.onPublish})
			subscribeClient(t, oc, "stall/t", qos, 0)

			pc := dialClient(t, n, mqttclient.Options{Version: packet.V5, ClientID: "pub", MaxInflight: 16})
			const total, size = 400, 32 << 10 // 12.5 MB: more than the stuck client's socket buffers
			var acked atomic.Int64
			for seq := 1; seq <= total; seq++ {
				pk := &packet.Publish{Topic: "stall/t", QoS: qos, Payload: stamp(0, seq, size)}
				var done func(error)
				if qos > 0 {
					done = func(err error) {
						if err != nil {
							t.Errorf("publish refused: %v", err)
						}
						acked.Add(1)
					}
				}
				if err := pc.PublishAsync(context.Background(), pk, done); err != nil {
					t.Fatal(err)
				}
				// One at a time, as the other subscriber takes them: its
				// queue never fills, the stuck one's does.
				brokertest.Eventually(t, 10*time.Second, func() bool { return other.n.Load() >= int64(seq) }, "the other subscriber keeps up")
			}
			other.check(t, "other", map[uint32]int{0: total})
			if qos == 0 {
				if d := n.Dropped(metrics.DropQueueFull); d == 0 {
					t.Fatal("nothing dropped for the stuck subscriber: its socket never filled")
				}
				if got := brokertest.Value(n.Metrics().SlowConsumers); got != 0 {
					t.Fatalf("a QoS 0 subscriber counted as slow: %v", got)
				}
				return
			}
			brokertest.Eventually(t, 10*time.Second, func() bool { return acked.Load() == total }, "every publish is acknowledged")
			if got := brokertest.Value(n.Metrics().SlowConsumers); got != 1 {
				t.Fatalf("sextant_slow_consumers_total = %v, want 1", got)
			}
			if got := n.Dropped(metrics.DropSlowConsumer); got < 1 {
				t.Fatalf("dropped{slow_consumer} = %v", got)
			}
		})
	}
}
