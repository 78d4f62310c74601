package broker_test

import (
	"fmt"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestSharedSubscriptionRoundRobin: each message goes to exactly one member
// of a group, in turn; every group and every ordinary subscriber gets all.
func TestSharedSubscriptionRoundRobin(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	var members []*brokertest.Raw
	for i, v := range []packet.Version{packet.V5, packet.V311, packet.V5} {
		cp := connect5(fmt.Sprint("m", i), true, 0)
		cp.Version = v
		r, _ := rawConnect(t, n, cp)
		if sa := r.Subscribe(1, sub("$share/g/job/#", 1)); sa.Codes[0] != packet.GrantedQoS1 {
			t.Fatalf("SUBACK %s", packet.Describe(sa))
		}
		members = append(members, r)
	}
	other, _ := rawConnect(t, n, connect5("other-group", true, 0))
	other.Subscribe(1, sub("$share/h/job/+", 1))
	plain, _ := rawConnect(t, n, connect5("plain", true, 0))
	plain.Subscribe(1, sub("job/#", 1))

	p, _ := rawConnect(t, n, connect5("p", true, 0))
	const total = 30
	for i := 0; i < total; i++ {
		publishAcked(t, p, uint16(i+1), pub("job/x", 1, 0, fmt.Sprint(i)))
	}
	seen := map[string]int{}
	for i, m := range members {
		got := 0
		for _, pb := range drain(t, m) {
			seen[string(pb.Payload)]++
			m.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: pb.PacketID})
			got++
		}
		if got != total/len(members) {
			t.Errorf("member %d got %d messages, want %d (round robin)", i, got, total/len(members))
		}
	}
	for i := 0; i < total; i++ {
		if seen[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d delivered to %d members of the group", i, seen[fmt.Sprint(i)])
		}
	}
	for name, r := range map[string]*brokertest.Raw{"group h": other, "plain": plain} {
		if got := len(drain(t, r)); got != total {
			t.Errorf("%s got %d, want %d", name, got, total)
		}
	}
}

// TestSharedSubscriptionRedeliveryToAnotherMember: a member that ends with
// messages unacknowledged (sent or still queued) has them handed to another
// member of the group; none is lost.
func TestSharedSubscriptionRedeliveryToAnotherMember(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	cp := connect5("lazy", true, 0)
	cp.Props.SetReceiveMaximum(2) // two sent, the rest queued
	lazy, _ := rawConnect(t, n, cp)
	lazy.Subscribe(1, sub("$share/g/w", 1))
	busy, _ := rawConnect(t, n, connect5("busy", true, 0))
	busy.Subscribe(1, sub("$share/g/w", 1))

	p, _ := rawConnect(t, n, connect5("p", true, 0))
	const total = 10
	for i := 0; i < total; i++ {
		publishAcked(t, p, uint16(i+1), pub("w", 1, 0, fmt.Sprint(i)))
	}
	lazyGot := 0
	for lazyGot < 2 {
		brokertest.Expect[*packet.Publish](lazy)
		lazyGot++
	}
	lazy.Close() // 2 unacknowledged, 3 queued

	got := map[string]int{}
	for len(got) < total {
		m := brokertest.Expect[*packet.Publish](busy)
		got[string(m.Payload)]++
		busy.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}
	for i := 0; i < total; i++ {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d received %d times by the remaining member", i, got[fmt.Sprint(i)])
		}
	}
	expectNothing(t, busy, "extra delivery")
}

// TestSharedSubscriptionNoLocalIsProtocolError: MQTT 5 forbids No Local on a
// shared subscription.
func TestSharedSubscriptionNoLocalIsProtocolError(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	r, _ := rawConnect(t, n, connect5("c", true, 0))
	r.Send(&packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: "$share/g/t", QoS: 1, NoLocal: true}}})
	r.ExpectDisconnect(packet.ProtocolError)
}

// TestSharedSubscriptionFilters: malformed share names are refused, and a
// shared "#" does not match $-topics.
func TestSharedSubscriptionFilters(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	r, _ := rawConnect(t, n, connect5("c", true, 0))
	for _, f := range []string{"$share/g", "$share//t", "$share/g+/t", "$share/g#/t", "$share/g/"} {
		if sa := r.Subscribe(1, sub(f, 1)); sa.Codes[0] != packet.TopicFilterInvalid {
			t.Errorf("%q: %s", f, packet.Describe(sa))
		}
	}
	r.Subscribe(2, sub("$share/g/#", 0))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, pub("$x/y", 0, 0, "dollar"))
	publishAcked(t, p, 2, pub("x/y", 0, 0, "plain"))
	got := drain(t, r)
	if len(got) != 1 || got[0].Topic != "x/y" {
		t.Fatalf("shared # got %v", got)
	}
	// Unsubscribing a shared subscription stops it.
	r.Send(&packet.Unsubscribe{PacketID: 3, Filters: []string{"$share/g/#"}})
	if ua := brokertest.Expect[*packet.Unsuback](r); ua.Codes[0] != packet.Success {
		t.Fatalf("UNSUBACK %s", packet.Describe(ua))
	}
	publishAcked(t, p, 3, pub("x/y", 0, 0, "after"))
	expectNothing(t, r, "after unsubscribe")
}
