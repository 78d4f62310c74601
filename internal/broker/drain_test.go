package broker_test

import (
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// DisconnectAll ends every connection with the drain's reason code (MQTT 5)
// or a plain close (3.1.1), and keeps the broker serving: a persistent
// session stays, offline, with its subscription, and its client can resume
// it here.
func TestDisconnectAllKeepsSessionsAndServing(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	v5, _ := rawConnect(t, n, connect5("v5", false, 600))
	v5.Subscribe(1, sub("drain/#", 1))
	v3, _ := rawConnect(t, n, connect3("v3", true))

	if got := n.Broker().DisconnectAll(packet.UseAnotherServer, "node draining"); got != 2 {
		t.Fatalf("DisconnectAll asked %d connections to end, want 2", got)
	}
	d := v5.ExpectDisconnect(packet.UseAnotherServer)
	if rs := d.Props.ReasonString; rs != "node draining" {
		t.Errorf("reason string %q", rs)
	}
	v3.ExpectClosedSilently()
	if !n.Broker().HoldsSession("v5") {
		t.Fatal("the persistent session was dropped")
	}

	again, ack := n.RawConnect(connect5("v5", false, 600))
	if ack.ReasonCode != packet.Success || !ack.SessionPresent {
		t.Fatalf("resume after DisconnectAll: %s", packet.Describe(ack))
	}
	pubber, _ := rawConnect(t, n, connect5("pub", true, 0))
	publishAcked(t, pubber, 1, pub("drain/x", 1, 1, "still here"))
	again.ExpectPublish("drain/x", "still here")
}
