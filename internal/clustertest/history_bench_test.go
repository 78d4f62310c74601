package clustertest

import (
	"context"
	"net"
	"net/http/httptest"
	"testing"

	"github.com/sextantmq/sextant/internal/adminapi/client"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// BenchmarkHistoryRead measures one history read of one record
// (GET /v1/topics/{topic}/messages?from=1&limit=1 through the admin API's
// handler, no HTTP connection) on three nodes over loopback TCP, a
// replicas 3 group, asked on a node that is not the home: read=linearizable
// (a peer request to the leader and a Raft barrier there: a log write
// and a majority's fsync), read=home (a peer request to the home's
// replica) and read=local (this node's replica). ns/op is the read's
// latency.
func BenchmarkHistoryRead(b *testing.B) {
	nodes := startBenchNodes(b, 3)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	ps, err := nodes[0].node.PutPolicies(ctx, []fsm.Rule{{Match: "b/#", Mode: fsm.Sequenced, Replicas: 3}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.node.WaitPolicies(ctx, ps.Version); err != nil {
			b.Fatal(err)
		}
	}
	conn, err := net.Dial("tcp", nodes[0].mqtt)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := connect(b, conn, "bench-pub", ConnectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	for range 10 {
		if code := pub.Publish("b/x", 1, false, "record"); code != packet.Success {
			b.Fatalf("publish: %v", code)
		}
	}
	g, _ := nodes[0].node.Meta().State().Group("b/x")
	var reader *benchNode
	for _, n := range nodes {
		if n.id != g.Home {
			reader = n
		}
	}
	until(b, reader.id+" holds the records", func() bool {
		r := reader.node.Groups().Get("b/x")
		return r != nil && r.Seq.NextSeq() == 11
	})
	h := reader.node.AdminHandler()
	for _, mode := range []string{"linearizable", "home", "local"} {
		b.Run(mode, func(b *testing.B) {
			target := client.TopicPath("b/x") + "/messages?from=1&limit=1&read=" + mode
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
				if rec.Code != 200 {
					b.Fatalf("%s: %d %s", mode, rec.Code, rec.Body.String())
				}
			}
		})
	}
}
