package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/cluster/directory"
	"github.com/sextantmq/sextant/internal/cluster/retainsync"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/message"
)

// fakeBroker records what the cluster layer hands it.
type fakeBroker struct {
	mu        sync.Mutex
	delivered []string // "topic direct groups"
}

var (
	_ Deliverer          = (*fakeBroker)(nil)
	_ retainsync.Holder  = (*fakeBroker)(nil)
	_ directory.Sessions = (*fakeBroker)(nil)
)

func (b *fakeBroker) DeliverForwarded(m *message.Message, direct bool, groups []string) {
	b.mu.Lock()
	b.delivered = append(b.delivered, fmt.Sprintf("%s %v %v", m.Topic, direct, groups))
	b.mu.Unlock()
}
func (b *fakeBroker) ApplyRetained(*message.Message) bool { return true }
func (b *fakeBroker) HandOver(string, bool) (*broker.SessionState, error) {
	return nil, nil
}
func (b *fakeBroker) ExportSession(string) (*broker.SessionState, error) { return nil, nil }
func (b *fakeBroker) ReleaseSession(*broker.SessionState)                {}
func (b *fakeBroker) DeliverRelayed(string, []broker.Relayed) int        { return 0 }
func (b *fakeBroker) HoldsSession(string) bool                           { return false }
func (b *fakeBroker) RetainedTombstones() []*message.Message             { return nil }
func (b *fakeBroker) ForgetTombstone(string, uint64)                     {}
func (b *fakeBroker) RetainedMessages(func(*message.Message) bool)       {}
func (b *fakeBroker) SessionIDs() []string                               { return nil }

func (b *fakeBroker) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.delivered
	b.delivered = nil
	return out
}

// staticMembers is a fixed member list with an event stream the test feeds.
type staticMembers struct {
	ms     []membership.Member
	events chan membership.Event
}

func (s *staticMembers) Members() []membership.Member    { return s.ms }
func (s *staticMembers) Events() <-chan membership.Event { return s.events }

type unitNode struct {
	c  *Layer
	b  *fakeBroker
	ev chan membership.Event
}

func startUnitCluster(t *testing.T, nw *memnet.Network, ids ...string) []*unitNode {
	t.Helper()
	var ms []membership.Member
	for i, id := range ids {
		ms = append(ms, membership.Member{ID: id, State: membership.StateAlive,
			Labels: membership.Labels{Tier: membership.TierEdge, PeerAddr: fmt.Sprintf("10.0.0.%d:7950", i+1)}})
	}
	var out []*unitNode
	for i, id := range ids {
		ln, err := nw.Listen(fmt.Sprintf("10.0.0.%d:7950", i+1))
		if err != nil {
			t.Fatal(err)
		}
		b := &fakeBroker{}
		ev := make(chan membership.Event, 16)
		c, err := New(Config{NodeID: id, Deliver: b, Relays: b, Retained: b, Sessions: b, Members: &staticMembers{ms: ms, events: ev}, Listener: ln,
			Dial: nw.DialFrom(fmt.Sprintf("10.0.0.%d", i+1))})
		if err != nil {
			t.Fatal(err)
		}
		c.Start()
		t.Cleanup(func() { _ = c.Close() })
		out = append(out, &unitNode{c: c, b: b, ev: ev})
	}
	return out
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within a minute", what)
		}
		time.Sleep(10 * time.Millisecond) // lint:sleep-ok polls in a synctest bubble's fake time
	}
}

// TestForwardOncePerNodeOneNodePerGroup checks the routing decisions: a
// node with several matching filters gets one copy; a shared group goes to
// one node, never to a group served at the origin; a failed node's
// interest is dropped.
func TestForwardOncePerNodeOneNodePerGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: time.Millisecond})
		defer nw.Close()
		ns := startUnitCluster(t, nw, "a", "b", "c")
		a, b, c := ns[0], ns[1], ns[2]
		b.c.AddInterest("x/#", 1)
		b.c.AddInterest("x/+", 1)
		b.c.AddInterest("$share/g/x/#", 1)
		c.c.AddInterest("$share/g/x/#", 1)
		c.c.AddInterest("$share/h/x/y", 1)
		poll(t, "interest known at a", func() bool {
			in := a.c.RemoteInterest()
			return len(in["b"]) == 3 && len(in["c"]) == 2
		})

		for range 4 {
			a.c.Forward(&message.Message{Topic: "x/y", Payload: []byte("p")}, nil)
		}
		poll(t, "deliveries", func() bool {
			b.b.mu.Lock()
			nb := len(b.b.delivered)
			b.b.mu.Unlock()
			c.b.mu.Lock()
			nc := len(c.b.delivered)
			c.b.mu.Unlock()
			return nb == 4 && nc >= 2 // b: once per message; c: at least group h every time
		})
		time.Sleep(time.Second) // lint:sleep-ok fake time: nothing more may arrive
		gotB, gotC := b.b.take(), c.b.take()
		gServed := 0
		for _, d := range gotB {
			if !slices.Contains([]string{"x/y true []", "x/y true [$share/g/x/#]"}, d) {
				t.Fatalf("b got %q", d)
			}
			if d == "x/y true [$share/g/x/#]" {
				gServed++
			}
		}
		if len(gotC) != 4 {
			t.Fatalf("c got %v, want group h with every message", gotC)
		}
		for _, d := range gotC {
			switch d {
			case "x/y false [$share/g/x/# $share/h/x/y]", "x/y false [$share/h/x/y $share/g/x/#]":
				gServed++
			case "x/y false [$share/h/x/y]":
			default:
				t.Fatalf("c got %q", d)
			}
		}
		if gServed != 4 {
			t.Fatalf("group g served %d times for 4 messages", gServed)
		}
		if len(gotB) != 4 {
			t.Fatalf("b got %d copies of 4 messages", len(gotB))
		}

		// Served at the origin: no node serves g again.
		a.c.Forward(&message.Message{Topic: "x/y"}, []string{"$share/g/x/#", "$share/h/x/y"})
		poll(t, "b delivery", func() bool { return len(b.b.take()) == 1 })
		time.Sleep(time.Second) // lint:sleep-ok fake time: nothing may arrive at c
		if got := c.b.take(); len(got) != 0 {
			t.Fatalf("c got %v for groups served at the origin", got)
		}

		// c fails: its interest goes, so group g is served by b alone.
		a.ev <- membership.Event{Type: membership.EventFail, Member: membership.Member{ID: "c", State: membership.StateFailed}}
		poll(t, "c dropped", func() bool { _, ok := a.c.RemoteInterest()["c"]; return !ok })
		for range 3 {
			a.c.Forward(&message.Message{Topic: "x/y"}, nil)
		}
		poll(t, "b serves g", func() bool {
			b.b.mu.Lock()
			defer b.b.mu.Unlock()
			return len(b.b.delivered) == 3
		})
		for _, d := range b.b.take() {
			if d != "x/y true [$share/g/x/#]" {
				t.Fatalf("after c failed, b got %q", d)
			}
		}
		if slices.Contains(a.c.Alive(), "c") {
			t.Fatal("c still alive at a")
		}
	})
}
