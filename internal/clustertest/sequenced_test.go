package clustertest

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestSequencedAcrossNodes: for replicas 1 and 3, QoS 1 messages published
// on one node reach subscribers on every node (the publisher's own
// included), in publish order, each with its sx-index, gap-free from 1.
func TestSequencedAcrossNodes(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := Start(t, 3, nil, coreNodes)
				c.SetPolicy(fsm.Rule{Match: "seq/#", Mode: fsm.Sequenced, Replicas: replicas})
				var subs []*Client
				for i, n := range c.Nodes() {
					s := n.Connect(fmt.Sprintf("sub%d", i), ConnectOptions{})
					s.Subscribe(1, "seq/#")
					subs = append(subs, s)
				}
				pub := c.Node(1).Connect("pub", ConnectOptions{})
				const total = 50
				for i := range total {
					if code := pub.Publish("seq/a", 1, false, fmt.Sprint(i)); code != packet.Success {
						t.Fatalf("publish %d: %v", i, code)
					}
				}
				for _, s := range subs {
					for i, m := range s.Collect(total) {
						if m.Payload != fmt.Sprint(i) || m.Index != uint64(i+1) || m.Topic != "seq/a" {
							t.Fatalf("%s: message %d: %v index %d", s.ID, i, m, m.Index)
						}
					}
				}
			})
		})
	}
}
