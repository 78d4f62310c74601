package clustertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/listener"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/netx"
)

// staticMembers is a fixed member list: the benchmark runs without gossip.
type staticMembers struct {
	ms     []membership.Member
	events chan membership.Event
}

func (s *staticMembers) Members() []membership.Member    { return s.ms }
func (s *staticMembers) Events() <-chan membership.Event { return s.events }

// benchNode is a broker on loopback TCP, with a cluster layer when it has
// peers.
type benchNode struct {
	id      string
	broker  *broker.Broker
	cluster *cluster.Layer
	mqtt    *listener.Server
}

// startBenchNodes starts n nodes on loopback TCP; with n > 1 they are
// linked by peer links over TCP.
func startBenchNodes(b *testing.B, n int) []*benchNode {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	peerLns := make([]net.Listener, n)
	var ms []membership.Member
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		peerLns[i] = ln
		ms = append(ms, membership.Member{ID: fmt.Sprintf("n%d", i+1), State: membership.StateAlive,
			Labels: membership.Labels{Tier: membership.TierEdge, PeerAddr: ln.Addr().String()}})
	}
	nodes := make([]*benchNode, n)
	for i := range n {
		lim := Limits()
		lim.MaxQueued = 100000
		nd := &benchNode{id: ms[i].ID}
		br, err := broker.New(broker.Config{Limits: lim, MaxConnections: 1000, Version: "bench"}, nil, clock.Real{}, log, metrics.NewNode())
		if err != nil {
			b.Fatal(err)
		}
		nd.broker = br
		if n > 1 {
			nd.cluster, err = cluster.New(cluster.Config{NodeID: nd.id, Deliver: br, Retained: br, Sessions: br, Dial: netx.DialTCP,
				Members: &staticMembers{ms: ms, events: make(chan membership.Event)}, Listener: peerLns[i], Log: log})
			if err != nil {
				b.Fatal(err)
			}
			br.SetRemote(nd.cluster.Remote())
			nd.cluster.Start()
		} else {
			_ = peerLns[i].Close()
		}
		mln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		nd.mqtt = listener.ServeTCP(mln, br, log, listener.Options{})
		nodes[i] = nd
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, nd := range nodes {
			_ = nd.mqtt.Close()
			_ = nd.broker.Close(ctx)
			_ = nd.mqtt.Wait(ctx)
			if nd.cluster != nil {
				_ = nd.cluster.Close()
			}
		}
	})
	return nodes
}

// until polls cond on real time (benchmarks run outside bubbles).
func until(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("%s: not true within 10s", what)
		}
		<-tick.C
	}
}

// BenchmarkP2P measures one publisher and one subscriber, 64-byte
// payloads, with the subscriber on the publisher's node ("1node") or on a
// second node linked over loopback TCP ("2nodes"). "stream" pipelines
// publishes (QoS 1 with a window of 1000 unacknowledged) and reports
// throughput (ns/op per delivered message) with the latency percentiles
// under that load; "pingpong" publishes one message at a time and waits for
// its delivery, so ns/op is the unloaded publish-to-delivery latency.
func BenchmarkP2P(b *testing.B) {
	for _, nodes := range []int{1, 2} {
		for _, qos := range []byte{0, 1} {
			for _, mode := range []string{"stream", "pingpong"} {
				b.Run(fmt.Sprintf("%dnode/qos%d/%s", nodes, qos, mode), func(b *testing.B) {
					benchP2P(b, nodes, qos, mode == "pingpong")
				})
			}
		}
	}
}

func benchP2P(b *testing.B, nodes int, qos byte, pingpong bool) {
	ns := startBenchNodes(b, nodes)
	pubNode, subNode := ns[0], ns[len(ns)-1]
	if nodes > 1 {
		until(b, "link up", func() bool { l := pubNode.cluster.Peers().Link(subNode.id); return l != nil && l.Up() })
	}
	sub := brokertest.DialPipe(b, subNode.mqtt.Addr().String(), "sub")
	sub.Send(b, &packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: "bench/t", QoS: qos}, {Filter: "bench/end", QoS: 1}}})
	sub.Flush(b)
	if p, err := sub.R.Next(); err != nil || p.Type() != packet.SUBACK {
		b.Fatalf("subscribe: %v %v", p, err)
	}
	if nodes > 1 {
		until(b, "interest known", func() bool {
			return slices.Contains(pubNode.cluster.RemoteInterest()[subNode.id], "bench/t")
		})
	}
	pub := brokertest.DialPipe(b, pubNode.mqtt.Addr().String(), "pub")

	hist := hdrhistogram.New(1, int64(10*time.Second), 3)
	delivered := 0
	arrived := make(chan struct{}, 1)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // subscriber
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
			if pp.QoS > 0 {
				sub.Ack(pp)
			}
			if pp.Topic == "bench/end" {
				_ = sub.W.Flush()
				return
			}
			sent := int64(binary.BigEndian.Uint64(pp.Payload))
			_ = hist.RecordValue(time.Now().UnixNano() - sent)
			got++
			delivered++
			if sub.R.Buffered() == 0 || got == b.N {
				_ = sub.W.Flush()
			}
			if pingpong {
				arrived <- struct{}{}
			}
		}
	}()
	window := make(chan struct{}, 1000)
	if qos == 1 {
		wg.Add(1)
		go func() { // publisher's acknowledgements
			defer wg.Done()
			for range b.N {
				if _, err := pub.R.Next(); err != nil {
					errs <- err
					return
				}
				<-window
			}
		}()
	}
	payload := make([]byte, 64)
	b.SetBytes(64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		p := &packet.Publish{Topic: "bench/t", QoS: qos, Payload: payload}
		pub.Publish(b, p, window)
		if pingpong {
			pub.Flush(b)
			select {
			case <-arrived:
			case err := <-errs:
				b.Fatal(err)
			}
		}
	}
	if qos == 0 {
		pub.Send(b, &packet.Publish{Topic: "bench/end", QoS: 1, PacketID: 1})
	}
	pub.Flush(b)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(delivered)/float64(b.N), "delivered/op")
	b.ReportMetric(float64(hist.ValueAtQuantile(50))/1e3, "p50-µs")
	b.ReportMetric(float64(hist.ValueAtQuantile(99))/1e3, "p99-µs")
	select {
	case err := <-errs:
		if err != io.EOF {
			b.Fatal(err)
		}
	default:
	}
}
