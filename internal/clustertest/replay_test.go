package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/delivery"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// checkRun checks that ms are topic's messages with indexes first, first+1,
// ... in order (no gap, no duplicate), with payloads "m<index>".
func checkRun(t *testing.T, who string, ms []Message, topic string, first uint64) {
	t.Helper()
	for i, m := range ms {
		want := first + uint64(i)
		if m.Topic != topic || m.Index != want || m.Payload != fmt.Sprintf("m%d", want) {
			t.Fatalf("%s: message %d is %v (index %d), want index %d", who, i, m, m.Index, want)
		}
	}
}

// TestSequencedReplayFrom: a subscriber joining with sx-from gets the
// topic's history from where it asks (earliest, an index, latest), then
// the live messages, while a publisher keeps publishing: no gap, no
// duplicate, in order.
func TestSequencedReplayFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "rp/#", Mode: fsm.Sequenced, Replicas: 3})
		pub := c.Node(0).Connect("pub", ConnectOptions{})
		const before, during = 40, 60
		for i := 1; i <= before; i++ {
			pub.Publish("rp/a", 1, false, fmt.Sprintf("m%d", i))
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := before + 1; i <= before+during; i++ {
				pub.Publish("rp/a", 1, false, fmt.Sprintf("m%d", i))
				time.Sleep(time.Millisecond) // lint:sleep-ok fake time: live messages while the replays run
			}
		}()
		cases := []struct {
			from  string
			first uint64
		}{{"earliest", 1}, {"17", 17}, {"latest", before}}
		var subs []*Client
		for i, tc := range cases {
			s := c.Node(1+i%2).Connect("from-"+tc.from, ConnectOptions{})
			s.SubscribeWith(map[string]string{"sx-from": tc.from}, 1, "rp/a")
			subs = append(subs, s)
		}
		wg.Wait()
		for i, tc := range cases {
			n := int(before + during - tc.first + 1)
			if tc.from == "latest" {
				// latest: the latest message when the subscription was
				// made, which live publishing may have moved on from.
				first := subs[i].Next()
				if first.Index < before {
					t.Fatalf("latest: first message %v index %d", first, first.Index)
				}
				rest := subs[i].Collect(int(before + during - first.Index))
				checkRun(t, subs[i].ID, append([]Message{first}, rest...), "rp/a", first.Index)
				continue
			}
			checkRun(t, subs[i].ID, subs[i].Collect(n), "rp/a", tc.first)
		}
		for _, s := range subs {
			if extra := s.Pending(); len(extra) > 0 {
				t.Fatalf("%s: %d messages more than published, first %v", s.ID, len(extra), extra[0])
			}
		}
		// A bad sx-from is refused with 0x83.
		bad := c.Node(2).Connect("bad-from", ConnectOptions{})
		if codes := bad.SubscribeCodes(map[string]string{"sx-from": "yesterday"}, 1, "rp/a"); len(codes) != 1 || codes[0] != packet.ImplementationSpecificError {
			t.Fatalf("sx-from=yesterday: %v", codes)
		}
	})
}

// TestSequencedPersistentBacklog: a persistent session's backlog on a
// sequenced topic is its cursor: it receives some messages, goes away,
// the topic moves on, and when it comes back it gets what it missed from
// its cursor, then live messages, with no gap and no duplicate.
func TestSequencedPersistentBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "bk/#", Mode: fsm.Sequenced, Replicas: 3})
		opts := ConnectOptions{SessionExpiry: 3600}
		sub := c.Node(1).Connect("keeper", opts)
		sub.Subscribe(1, "bk/#")
		pub := c.Node(2).Connect("pub", ConnectOptions{})
		for i := 1; i <= 20; i++ {
			pub.Publish("bk/a", 1, false, fmt.Sprintf("m%d", i))
		}
		checkRun(t, "online", sub.Collect(20), "bk/a", 1)
		sub.Close()
		for i := 21; i <= 70; i++ {
			pub.Publish("bk/a", 1, false, fmt.Sprintf("m%d", i))
		}
		back := c.Node(1).Connect("keeper", ConnectOptions{SessionExpiry: 3600, Resume: true})
		if !back.Connack.SessionPresent {
			t.Fatal("the session was not kept")
		}
		for i := 71; i <= 90; i++ {
			pub.Publish("bk/a", 1, false, fmt.Sprintf("m%d", i))
		}
		checkRun(t, "back", back.Collect(70), "bk/a", 21)
		if extra := back.Pending(); len(extra) > 0 {
			t.Fatalf("%d messages more than published, first %v", len(extra), extra[0])
		}
		if n := c.Node(1).Gather("sextant_delivery_replays_total", nil); n == 0 {
			t.Error("the backlog was not replayed")
		}
	})
}

// TestSequencedRetained: the retained message of a sequenced topic is the
// latest retained record of its log, sent at SUBSCRIBE on any node; an
// empty retained publish clears it.
func TestSequencedRetained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "rt/#", Mode: fsm.Sequenced, Replicas: 3})
		pub := c.Node(0).Connect("pub", ConnectOptions{})
		pub.Publish("rt/a", 1, true, "old")
		pub.Publish("rt/a", 1, true, "new")
		pub.Publish("rt/a", 1, false, "not retained")
		pub.Publish("rt/b", 1, true, "b")
		pub.Publish("rt/b", 1, true, "")
		// Well after the publishes: a new feed starts at the records
		// appended since its subscription (less a margin for clock skew).
		time.Sleep(time.Second) // lint:sleep-ok fake time
		s := c.Node(2).Connect("s", ConnectOptions{})
		s.Subscribe(1, "rt/#")
		m := s.Next()
		if m.Topic != "rt/a" || m.Payload != "new" || !m.Retain || m.Index != 2 {
			t.Fatalf("retained message %v index %d, want rt/a \"new\" index 2, retained", m, m.Index)
		}
		pub.Publish("rt/a", 1, false, "live")
		if m := s.Next(); m.Payload != "live" || m.Retain {
			t.Fatalf("next message %v, want the live one", m)
		}
		if extra := s.Pending(); len(extra) > 0 {
			t.Fatalf("unexpected %v", extra)
		}
	})
}

// TestSequencedRetentionLoss: records that retention removed before a
// persistent session read them are counted (and logged), never silently
// skipped: the session gets the rest from the first record held, without
// gaps after it.
func TestSequencedRetentionLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 2, nil, coreNodes, func(o *Options) {
			o.GroupSegmentBytes = 2048
			o.Config = func(cfg *config.Config) {
				cfg.Tier = membership.TierCore
				cfg.RetentionInterval = 200 * time.Millisecond
			}
		})
		c.SetPolicy(fsm.Rule{Match: "rl/#", Mode: fsm.Sequenced, Replicas: 1, Retention: &fsm.Retention{Messages: 5}})
		sub := c.Node(1).Connect("slow", ConnectOptions{SessionExpiry: 3600})
		sub.Subscribe(1, "rl/#")
		pub := c.Node(0).Connect("pub", ConnectOptions{})
		pad := strings.Repeat("x", 100)
		for i := 1; i <= 10; i++ {
			pub.Publish("rl/a", 1, false, fmt.Sprintf("m%d", i))
		}
		checkRun(t, "online", sub.Collect(10), "rl/a", 1)
		sub.Close()
		for i := 11; i <= 300; i++ {
			pub.Publish("rl/a", 1, false, fmt.Sprintf("m%d%s", i, pad))
		}
		home := c.Node(0)
		c.Eventually("retention removed the first records", func() bool {
			r := home.Node.Groups().Get("rl/a")
			return r != nil && r.Seq.FirstSeq() > 50
		})
		first := home.Node.Groups().Get("rl/a").Seq.FirstSeq()
		back := c.Node(1).Connect("slow", ConnectOptions{SessionExpiry: 3600, Resume: true})
		ms := back.Collect(int(300 - first + 1))
		for i, m := range ms {
			if want := first + uint64(i); m.Index != want || !strings.HasPrefix(m.Payload, fmt.Sprintf("m%d", want)) {
				t.Fatalf("message %d: %v index %d, want index %d", i, m, m.Index, want)
			}
		}
		lost := c.Node(1).Gather("sextant_delivery_lost_records_total", nil)
		t.Logf("retention kept positions from %d; the session lost %v records", first, lost)
		if lost != float64(first-11) {
			t.Fatalf("lost records counted %v, want %d (positions 11 to %d)", lost, first-11, first-1)
		}
	})
}

// TestSequencedHistory: a node reads a sequenced topic's bounds and
// messages by index from a replica of its group (its own or the home's),
// and says clearly what it cannot read.
func TestSequencedHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "hs/#", Mode: fsm.Sequenced, Replicas: 1})
		pub := c.Node(0).Connect("pub", ConnectOptions{})
		for i := 1; i <= 30; i++ {
			pub.Publish("hs/a", 1, i == 30, fmt.Sprintf("m%d", i))
		}
		ctx := context.Background()
		for _, n := range c.Nodes() { // node 1 holds the group; the others read its home
			c.Eventually(n.ID+" knows the group", func() bool {
				_, ok := n.Node.Meta().State().Group("hs/a")
				return ok
			})
			h := n.Node.History()
			info, err := h.Topic(ctx, "hs/a", delivery.ReadAny)
			if err != nil || info.First != 1 || info.Latest != 30 || info.Home != c.Node(0).ID || info.ServedBy != c.Node(0).ID {
				t.Fatalf("%s: topic info %+v, %v", n.ID, info, err)
			}
			recs, _, err := h.Messages(ctx, "hs/a", 25, 3, delivery.ReadHome)
			if err != nil || len(recs) != 3 {
				t.Fatalf("%s: messages from 25: %d, %v", n.ID, len(recs), err)
			}
			for i, r := range recs {
				if r.Index != uint64(25+i) || string(r.Message.Payload) != fmt.Sprintf("m%d", 25+i) {
					t.Fatalf("%s: record %d: index %d %q", n.ID, i, r.Index, r.Message.Payload)
				}
			}
			if recs, _, err := h.Messages(ctx, "hs/a", 31, 10, delivery.ReadAny); err != nil || len(recs) != 0 {
				t.Fatalf("%s: past the latest: %d, %v", n.ID, len(recs), err)
			}
			if _, err := h.Topic(ctx, "other/x", delivery.ReadAny); !errors.Is(err, delivery.ErrNotSequenced) {
				t.Fatalf("%s: a direct topic: %v", n.ID, err)
			}
			if _, err := h.Topic(ctx, "hs/never", delivery.ReadAny); !errors.Is(err, delivery.ErrUnknownTopic) {
				t.Fatalf("%s: a topic never published: %v", n.ID, err)
			}
		}
	})
}
