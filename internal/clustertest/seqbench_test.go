package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// BenchmarkSequencedP2P is BenchmarkP2P's stream on three nodes over
// loopback TCP for a direct topic and sequenced topics with replicas 1 and
// 3: the publisher on n1 (the group's home, its first publisher's node),
// the subscriber on n3. The group (one for every bench/ topic) is created
// and its replicas opened by a publish to another of its topics before
// the timed part, which therefore measures a running group, not its
// creation. For a CPU profile of the sequenced path:
//
//	go test -run '^$' -bench 'SequencedP2P/r3' -benchtime 100000x -cpuprofile cpu.out ./internal/clustertest
func BenchmarkSequencedP2P(b *testing.B) {
	for _, mode := range []struct {
		name     string
		replicas int // 0: direct
	}{{"direct", 0}, {"r1", 1}, {"r3", 3}} {
		for _, qos := range []byte{0, 1} {
			b.Run(fmt.Sprintf("%s/qos%d", mode.name, qos), func(b *testing.B) {
				ns := startBenchNodes(b, 3)
				if mode.replicas > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					ps, err := ns[0].node.PutPolicies(ctx, []fsm.Rule{{Match: "bench/#", Mode: fsm.Sequenced, Replicas: mode.replicas, Group: "bench"}}, nil)
					if err != nil {
						b.Fatal(err)
					}
					for _, n := range ns {
						if err := n.node.WaitPolicies(ctx, ps.Version); err != nil {
							b.Fatal(err)
						}
					}
					warm, err := mqttclient.Dial(ctx, "mqtt://"+ns[0].mqtt, mqttclient.Options{ClientID: "warm"})
					if err != nil {
						b.Fatal(err)
					}
					err = warm.Publish(ctx, &packet.Publish{Topic: "bench/warm", QoS: 1, Payload: []byte("warm")})
					_ = warm.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
				runP2P(b, ns, "bench/t", qos, false, mode.replicas > 0)
			})
		}
	}
}
