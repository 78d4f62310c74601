package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// How deliveries reach sockets: written inline by the publisher's reader
// when a subscriber's connection is idle and its socket takes the bytes,
// by the connection's writer goroutine otherwise. These tests hold the
// guarantees across both paths; internal/session tests the paths
// themselves.

// stamp is a payload naming its publisher and sequence number.
func stamp(pub, seq, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.BigEndian.PutUint32(b, uint32(pub))
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
	return b
}

// tally is what a subscriber received, per publisher, in arrival order.
type tally struct {
	mu   sync.Mutex
	seqs map[uint32][]uint32
	n    atomic.Int64
}

func (t *tally) onPublish(p *packet.Publish) {
	pub, seq := binary.BigEndian.Uint32(p.Payload), binary.BigEndian.Uint32(p.Payload[4:])
	t.mu.Lock()
	if t.seqs == nil {
		t.seqs = map[uint32][]uint32{}
	}
	t.seqs[pub] = append(t.seqs[pub], seq)
	t.mu.Unlock()
	t.n.Add(1)
}

// check fails unless each publisher's messages arrived exactly once and in
// order: 1..counts[pub].
func (t *tally) check(tb testing.TB, who string, counts map[uint32]int) {
	tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	for pub, want := range counts {
		got := t.seqs[pub]
		if len(got) != want {
			tb.Errorf("%s: %d messages from publisher %d, want %d", who, len(got), pub, want)
			continue
		}
		for i, s := range got {
			if s != uint32(i+1) {
				tb.Errorf("%s: publisher %d's message %d arrived as number %d (order or exactly-once broken)", who, pub, s, i+1)
				break
			}
		}
	}
}

func dialClient(tb testing.TB, n *brokertest.Node, o mqttclient.Options) *mqttclient.Client {
	tb.Helper()
	c, err := mqttclient.Dial(context.Background(), "mqtt://"+n.MQTT(), o)
	if err != nil {
		tb.Fatalf("dial %s: %v", o.ClientID, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func subscribeClient(tb testing.TB, c *mqttclient.Client, filter string, qos byte, id uint32) {
	tb.Helper()
	s := &packet.Subscribe{Subs: []packet.Subscription{{Filter: filter, QoS: qos}}}
	if id != 0 {
		s.Props.SubscriptionIDs = []uint32{id}
	}
	if _, err := c.Subscribe(context.Background(), s); err != nil {
		tb.Fatalf("subscribe: %v", err)
	}
}

// TestPerPublisherOrderAndQoSAccounting: publishers at QoS 0, 1 and 2
// publish concurrently, pipelined, to subscribers of both protocol versions
// at every granted QoS (one with a subscription identifier, so its
// encoding is not shared): every subscriber gets every publisher's messages
// exactly once and in order, every QoS 1/2 publish is acknowledged, and the
// node's queues and in-flight windows are empty afterwards. The traffic
// mixes single messages (written inline) and bursts (written by the writer
// goroutines).
func TestPerPublisherOrderAndQoSAccounting(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	subs := []struct {
		v   packet.Version
		qos byte
		id  uint32
	}{{packet.V311, 2, 0}, {packet.V5, 1, 0}, {packet.V5, 2, 7}, {packet.V5, 0, 0}, {packet.V311, 1, 0}}
	tallies := make([]*tally, len(subs))
	for i, s := range subs {
		tallies[i] = &tally{}
		c := dialClient(t, n, mqttclient.Options{Version: s.v, ClientID: fmt.Sprintf("sub%d", i), OnPublish: tallies[i].onPublish})
		subscribeClient(t, c, "order/#", s.qos, s.id)
	}

	const perPub = 600
	pubQoS := []byte{0, 1, 2, 1}
	var acked, failed atomic.Int64
	var wg sync.WaitGroup
	for p, qos := range pubQoS {
		c := dialClient(t, n, mqttclient.Options{Version: packet.V5, ClientID: fmt.Sprintf("pub%d", p), MaxInflight: 32})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; seq <= perPub; seq++ {
				pk := &packet.Publish{Topic: fmt.Sprintf("order/%d", p), QoS: qos, Payload: stamp(p, seq, 32)}
				done := func(err error) {
					if err != nil {
						failed.Add(1)
					} else {
						acked.Add(1)
					}
				}
				if qos == 0 {
					done = nil
				}
				if err := c.PublishAsync(context.Background(), pk, done); err != nil {
					t.Errorf("publisher %d: %v", p, err)
					return
				}
				if seq%50 == 0 {
					// A pause now and then: single messages between the bursts.
					if err := c.Ping(context.Background()); err != nil {
						t.Errorf("publisher %d: ping: %v", p, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	want := int64(len(pubQoS) * perPub)
	for i, tl := range tallies {
		brokertest.Eventually(t, 30*time.Second, func() bool { return tl.n.Load() >= want }, fmt.Sprintf("subscriber %d gets every message", i))
	}
	brokertest.Eventually(t, 10*time.Second, func() bool { return acked.Load()+failed.Load() == 3*perPub }, "every QoS 1/2 publish is acknowledged")
	if failed.Load() != 0 {
		t.Fatalf("%d publishes refused", failed.Load())
	}
	counts := map[uint32]int{}
	for p := range pubQoS {
		counts[uint32(p)] = perPub
	}
	for i, tl := range tallies {
		tl.check(t, fmt.Sprintf("subscriber %d", i), counts)
	}
	m := n.Metrics()
	brokertest.Eventually(t, 10*time.Second, func() bool {
		return brokertest.Value(m.InflightMessages) == 0 && brokertest.Value(m.QueuedMessages) == 0
	}, "no message left queued or in flight")
	if d := n.Dropped(metrics.DropQueueFull); d != 0 {
		t.Fatalf("%v messages dropped", d)
	}
}
