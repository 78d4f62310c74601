package clustertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/node"
)

// benchNode is a node on loopback TCP, built by node.New as `sextant
// serve` builds one, without a store (node.Options.Ephemeral: the
// benchmark measures the data path, not the disk).
type benchNode struct {
	id      string
	node    *node.Node
	cluster *cluster.Layer // nil on a node running alone
	mqtt    string
}

// startBenchNodes starts n nodes on loopback TCP; with n > 1 they form a
// cluster (gossip, metadata group and peer links on each node's cluster
// address) and are linked by peer links over TCP.
func startBenchNodes(b *testing.B, n int) []*benchNode {
	b.Helper()
	nodes := make([]*benchNode, 0, n)
	var join []string
	for i := range n {
		cfg := config.Default()
		cfg.NodeID = fmt.Sprintf("n%d", i+1)
		cfg.DataDir = b.TempDir()
		cfg.MQTTAddr, cfg.WSAddr, cfg.AdminAddr = "127.0.0.1:0", "", ""
		cfg.MaxConnections = 1000
		cfg.MaxQueuedMessages = 100000
		cfg.SysInterval = 0
		if n > 1 {
			cfg.ClusterAddr = freeAddr(b)
			cfg.Join = join
			join = []string{cfg.ClusterAddr}
		}
		nd, err := node.New(cfg, node.Options{Version: "bench", Ephemeral: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := nd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = nd.Shutdown(ctx)
		})
		nodes = append(nodes, &benchNode{id: cfg.NodeID, node: nd, cluster: nd.ClusterLayer(), mqtt: nd.Addr("mqtt")})
	}
	if n > 1 {
		until(b, "cluster formed", func() bool {
			for _, nd := range nodes {
				if len(nd.cluster.Alive()) != n {
					return false
				}
			}
			return true
		})
	}
	return nodes
}

// freeAddr returns a loopback address whose port is free for TCP and UDP
// (a cluster address carries both).
func freeAddr(b *testing.B) string {
	b.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		if pc, err := net.ListenPacket("udp", addr); err == nil {
			_ = pc.Close()
			return addr
		}
	}
	b.Fatal("no free port for TCP and UDP")
	return ""
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
	runP2P(b, startBenchNodes(b, nodes), "bench/t", qos, pingpong, false)
}

// runP2P publishes to topic on the first node and subscribes on the last.
// A sequenced topic's subscription reaches the publisher's node as a feed,
// not as remote interest, so the run does not wait for that.
func runP2P(b *testing.B, ns []*benchNode, topic string, qos byte, pingpong, sequenced bool) {
	nodes := len(ns)
	pubNode, subNode := ns[0], ns[len(ns)-1]
	if nodes > 1 {
		until(b, "link up", func() bool { l := pubNode.cluster.Peers().Link(subNode.id); return l != nil && l.Up() })
	}
	sub := brokertest.DialPipe(b, subNode.mqtt, "sub")
	sub.Send(b, &packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: topic, QoS: qos}, {Filter: "bench/end", QoS: 1}}})
	sub.Flush(b)
	if p, err := sub.R.Next(); err != nil || p.Type() != packet.SUBACK {
		b.Fatalf("subscribe: %v %v", p, err)
	}
	if nodes > 1 && !sequenced {
		until(b, "interest known", func() bool {
			return slices.Contains(pubNode.cluster.RemoteInterest()[subNode.id], topic)
		})
	}
	pub := brokertest.DialPipe(b, pubNode.mqtt, "pub")

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
		p := &packet.Publish{Topic: topic, QoS: qos, Payload: payload}
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
