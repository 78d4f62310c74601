package broker_test

import (
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
)

func TestSmokeV5AndV3(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	sub := n.ConnectV5(&paho.Connect{ClientID: "sub", CleanStart: true, KeepAlive: 30})
	sub.Sub("a/+", 1)
	pub := n.ConnectV5(&paho.Connect{ClientID: "pub", CleanStart: true, KeepAlive: 30})
	pub.Pub("a/b", 1, false, "hello")
	if m := sub.Next(); string(m.Payload) != "hello" || m.Topic != "a/b" || m.QoS != 1 {
		t.Fatalf("got %s", brokertest.String(m))
	}
	v3 := n.ConnectV3("v3", true, nil)
	brokertest.Wait(t, v3.Subscribe("a/#", 2, nil), "v3 subscribe")
	pub.Pub("a/c", 2, false, "two")
	if m := v3.Next(); string(m.Payload()) != "two" || m.Qos() != 2 {
		t.Fatalf("v3 got %q q%d", m.Payload(), m.Qos())
	}
	if m := sub.Next(); string(m.Payload) != "two" {
		t.Fatalf("v5 got %s", brokertest.String(m))
	}
}
