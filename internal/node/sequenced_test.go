package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/delivery"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// TestSequencedAlone: a node running alone (no cluster address) runs
// sequenced topics too: its placement groups have one replica, on itself,
// and an MQTT 5 subscriber gets every message with its sx-index, in order,
// both live and replayed with sx-from; the history is readable by index.
func TestSequencedAlone(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	brokertest.Eventually(t, 10*time.Second, func() bool {
		_, err := n.PutPolicies(ctx, []fsm.Rule{{Match: "log/#", Mode: fsm.Sequenced}}, nil)
		return err == nil
	}, "policy set")
	sub := n.ConnectV5(&paho.Connect{ClientID: "sub", CleanStart: true, KeepAlive: 30})
	sub.Sub("log/#", 1)
	pub := n.ConnectV5(&paho.Connect{ClientID: "pub", CleanStart: true, KeepAlive: 30})
	for i := 1; i <= 20; i++ {
		if r := pub.Pub("log/a", 1, false, fmt.Sprintf("m%d", i)); r.ReasonCode != 0 {
			t.Fatalf("publish %d: reason %#x", i, r.ReasonCode)
		}
	}
	index := func(p *paho.Publish) string {
		if p.Properties == nil {
			return ""
		}
		return p.Properties.User.Get(delivery.IndexProperty)
	}
	for i := 1; i <= 20; i++ {
		m := sub.Next()
		if string(m.Payload) != fmt.Sprintf("m%d", i) || index(m) != fmt.Sprint(i) {
			t.Fatalf("message %d: %q sx-index %q", i, m.Payload, index(m))
		}
	}
	late := n.ConnectV5(&paho.Connect{ClientID: "late", CleanStart: true, KeepAlive: 30})
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if _, err := late.Subscribe(sctx, &paho.Subscribe{
		Subscriptions: []paho.SubscribeOptions{{Topic: "log/a", QoS: 1}},
		Properties:    &paho.SubscribeProperties{User: paho.UserProperties{{Key: "sx-from", Value: "15"}}},
	}); err != nil {
		t.Fatal(err)
	}
	for i := 15; i <= 20; i++ {
		if m := late.Next(); index(m) != fmt.Sprint(i) {
			t.Fatalf("replay: %q sx-index %q, want %d", m.Payload, index(m), i)
		}
	}
	recs, info, err := n.History().Messages(ctx, "log/a", 19, 5, delivery.ReadAny)
	if err != nil || len(recs) != 2 || info.Latest != 20 || info.Home != "test" || string(recs[0].Message.Payload) != "m19" {
		t.Fatalf("history: %d records, %+v, %v", len(recs), info, err)
	}
}
