package broker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/store"
)

// TestCursorStoredWithFirstRecord: a persistent session online when the
// first record of a sequenced group reaches it has its stored record
// carry its cursor on the group at once, not only at its next disconnect:
// after a kill -9 of its node it would otherwise have no cursor on a
// group created after it subscribed, and the records published while the
// node was down would never be replayed to it.
func TestCursorStoredWithFirstRecord(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("s", true, 3600))
	s.Subscribe(1, sub("g/#", 1))
	n.Broker().DeliverSequenced("grp", []*message.Message{{Topic: "g/a", Payload: []byte("first"), QoS: 1}}, []uint64{7})
	s.ExpectPublish("g/a", "first")
	brokertest.Eventually(t, 5*time.Second, func() bool {
		var cursors []store.CursorRecord
		_ = n.Store().LoadSessions(func(r *store.SessionRecord) error {
			if r.ClientID == "s" {
				cursors = r.Cursors
			}
			return nil
		})
		return slices.Contains(cursors, store.CursorRecord{Group: "grp", Seq: 7})
	}, "the session's stored record has its cursor on grp at 7")
}

// storedCursor is client's stored cursor on group (0: none): what its
// node's restart after a kill -9 now would resume it from.
func storedCursor(n *brokertest.Node, client, group string) uint64 {
	var seq uint64
	_ = n.Store().LoadSessions(func(r *store.SessionRecord) error {
		if r.ClientID == client {
			for _, c := range r.Cursors {
				if c.Group == group {
					seq = c.Seq
				}
			}
		}
		return nil
	})
	return seq
}

// TestCursorStoredWithEachDelivery: an online persistent session's
// stored cursor follows the records it takes, without a session record
// write: with each QoS 1/2 delivery (the records it acknowledged are then
// behind it, those in flight are in its stored queue, to be sent again
// with DUP), and at most cursorEvery (256) positions behind through QoS 0
// deliveries. A crash of its node then replays none of them from the log.
// (It stayed at the session's first record of the group until its next
// record write, a disconnect or a SUBSCRIBE.)
func TestCursorStoredWithEachDelivery(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("s", true, 3600))
	s.Subscribe(1, sub("g/#", 1))
	for seq := uint64(1); seq <= 10; seq++ {
		n.Broker().DeliverSequenced("grp", []*message.Message{{Topic: "g/a", Payload: fmt.Appendf(nil, "m%d", seq), QoS: 1}}, []uint64{seq})
		p := s.ExpectPublish("g/a", fmt.Sprintf("m%d", seq))
		if seq <= 5 {
			s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID})
		}
	}
	brokertest.Eventually(t, 5*time.Second, func() bool { return storedCursor(n, "s", "grp") == 10 },
		"the stored cursor is at the last record taken (10)")
	var queued []uint64
	brokertest.Eventually(t, 5*time.Second, func() bool {
		queued = queued[:0]
		_ = n.Store().LoadMessages("s", func(q *store.QueuedMessage) error {
			if q.State == store.SentAwaitingAck {
				queued = append(queued, q.Seq)
			}
			return nil
		})
		return len(queued) == 5
	}, "the five records not acknowledged are in the stored queue, sent")

	q0, _ := rawConnect(t, n, connect5("q0", true, 3600))
	q0.Subscribe(1, sub("z/#", 0))
	const last = 600
	for seq := uint64(1); seq <= last; seq++ {
		n.Broker().DeliverSequenced("zgrp", []*message.Message{{Topic: "z/a", Payload: fmt.Appendf(nil, "z%d", seq)}}, []uint64{seq})
		q0.ExpectPublish("z/a", fmt.Sprintf("z%d", seq))
	}
	brokertest.Eventually(t, 5*time.Second, func() bool { return storedCursor(n, "q0", "zgrp") > last-256 },
		"the stored cursor of a QoS 0 session is within 256 positions of the last record taken")
}

// TestDeliverSequencedRun: records delivered as one run (one walk of the
// subscription index per run of a topic and publisher) reach every
// matching subscriber in order, not the publisher's own No Local
// subscription, and a shared group's members in turn, record by record as
// when each record came alone.
func TestDeliverSequencedRun(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	all, _ := rawConnect(t, n, connect5("all", true, 0))
	all.Subscribe(1, sub("g/#", 0))
	self, _ := rawConnect(t, n, connect5("p", true, 0))
	self.Subscribe(1, packet.Subscription{Filter: "g/#", NoLocal: true})
	members := make([]*brokertest.Raw, 2)
	for i := range members {
		members[i], _ = rawConnect(t, n, connect5(fmt.Sprintf("m%d", i), true, 0))
		members[i].Subscribe(1, sub("$share/w/g/#", 0))
	}
	var ms []*message.Message
	var seqs []uint64
	for i := range 8 {
		name := "g/a"
		if i >= 6 {
			name = "g/b"
		}
		ms = append(ms, &message.Message{Topic: name, Payload: fmt.Appendf(nil, "r%d", i), Publisher: "p"})
		seqs = append(seqs, uint64(10+i))
	}
	n.Broker().DeliverSequenced("grp", ms, seqs)
	for _, m := range ms {
		all.ExpectPublish(m.Topic, string(m.Payload))
	}
	got := map[string]int{}
	for i, m := range members {
		for range 4 {
			p := m.Recv().(*packet.Publish)
			got[string(p.Payload)]++
		}
		if extra := m.Ping(); len(extra) > 0 {
			t.Fatalf("member %d got more than its turn: %s", i, packet.Describe(extra[0]))
		}
	}
	for _, m := range ms {
		if got[string(m.Payload)] != 1 {
			t.Fatalf("shared group: record %s delivered %d times, want once (all: %v)", m.Payload, got[string(m.Payload)], got)
		}
	}
	if extra := self.Ping(); len(extra) > 0 {
		t.Fatalf("the publisher's No Local subscription got %s", packet.Describe(extra[0]))
	}
}
