package broker_test

import (
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func retained(topic string, qos byte, payload string) *packet.Publish {
	return &packet.Publish{Topic: topic, QoS: qos, Retain: true, Payload: []byte(payload)}
}

// TestRetainedSetReplaceDelete: a retained message is delivered to later
// subscribers with the retain flag; a new one replaces it; an empty payload
// deletes it; live deliveries carry retain 0.
func TestRetainedSetReplaceDelete(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	live, _ := rawConnect(t, n, connect5("live", true, 0))
	live.Subscribe(1, sub("r/#", 1))

	publishAcked(t, p, 1, retained("r/a", 1, "first"))
	if m := live.ExpectPublish("r/a", "first"); m.Retain {
		t.Fatal("live delivery of a retained message has retain set (subscription without retain as published)")
	}
	s, _ := rawConnect(t, n, connect5("s1", true, 0))
	s.Subscribe(1, sub("r/a", 1))
	if m := s.ExpectPublish("r/a", "first"); !m.Retain || m.QoS != 1 {
		t.Fatalf("retained on subscribe: %s", packet.Describe(m))
	}

	publishAcked(t, p, 2, retained("r/a", 0, "second"))
	s2, _ := rawConnect(t, n, connect5("s2", true, 0))
	s2.Subscribe(1, sub("r/+", 1))
	if m := s2.ExpectPublish("r/a", "second"); !m.Retain || m.QoS != 0 {
		t.Fatalf("replaced retained: %s", packet.Describe(m))
	}
	expectNothing(t, s2, "more than one retained message")

	// An empty payload deletes it (and is delivered to live subscribers).
	publishAcked(t, p, 3, retained("r/a", 1, ""))
	s3, _ := rawConnect(t, n, connect5("s3", true, 0))
	s3.Subscribe(1, sub("r/#", 1))
	expectNothing(t, s3, "deleted retained message delivered")
	if n.Broker().Stats().Retained != 0 {
		t.Fatal("retained count is not 0 after delete")
	}

	// Several topics match a wildcard; a 3.1.1 subscriber gets them too.
	publishAcked(t, p, 4, retained("r/x", 1, "x"))
	publishAcked(t, p, 5, retained("r/y/z", 2, "yz"))
	s4, _ := rawConnect(t, n, connect3("s4", true))
	s4.Subscribe(1, sub("r/#", 2))
	got := map[string]byte{}
	for i := 0; i < 2; i++ {
		m := brokertest.Expect[*packet.Publish](s4)
		if !m.Retain {
			t.Fatalf("3.1.1 retained without retain flag: %s", packet.Describe(m))
		}
		got[m.Topic] = m.QoS
		if m.QoS == 2 {
			s4.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: m.PacketID})
		} else if m.QoS == 1 {
			s4.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
		}
	}
	if got["r/x"] != 1 || got["r/y/z"] != 2 {
		t.Fatalf("retained on wildcard: %v", got)
	}
}

// TestRetainHandling checks the v5 subscription option: 0 sends retained
// messages on every subscribe, 1 only when the subscription is new, 2 never.
func TestRetainHandling(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, retained("rh", 1, "kept"))

	s, _ := rawConnect(t, n, connect5("s", true, 0))
	for _, tc := range []struct {
		handling byte
		first    bool // delivered on the first subscribe
		again    bool // delivered on re-subscribing the same filter
	}{{0, true, true}, {1, true, false}, {2, false, false}} {
		o := packet.Subscription{Filter: "rh", QoS: 1, RetainHandling: tc.handling}
		for i, want := range []bool{tc.first, tc.again} {
			s.Subscribe(uint16(10+i), o)
			got := drain(t, s)
			if (len(got) == 1) != want || len(got) > 1 {
				t.Fatalf("retain handling %d, subscribe #%d: got %d packets, want delivered=%v", tc.handling, i+1, len(got), want)
			}
			for _, m := range got {
				s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
			}
		}
		s.Send(&packet.Unsubscribe{PacketID: 20, Filters: []string{"rh"}})
		brokertest.Expect[*packet.Unsuback](s)
	}
}

// TestRetainAsPublished: with the option the retain flag of live messages is
// kept; without it, it is cleared. Retained messages sent on subscribe
// always carry it.
func TestRetainAsPublished(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.Subscribe(1, packet.Subscription{Filter: "rap/keep", QoS: 1, RetainAsPublished: true})
	s.Subscribe(2, sub("rap/clear", 1))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, retained("rap/keep", 0, "k"))
	publishAcked(t, p, 2, retained("rap/clear", 0, "c"))
	publishAcked(t, p, 3, pub("rap/keep", 0, 0, "not retained"))
	if m := s.ExpectPublish("rap/keep", "k"); !m.Retain {
		t.Fatal("retain as published: retain flag cleared")
	}
	if m := s.ExpectPublish("rap/clear", "c"); m.Retain {
		t.Fatal("without retain as published: retain flag kept")
	}
	if m := s.ExpectPublish("rap/keep", "not retained"); m.Retain {
		t.Fatal("retain as published: retain set on a message published without it")
	}
}
