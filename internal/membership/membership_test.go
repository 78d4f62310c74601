package membership

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/logging/logtest"
	"github.com/sextantmq/sextant/internal/memnet"
)

// node starts a member on host's port 7946 of nw.
func node(t *testing.T, nw *memnet.Network, id, host string, labels Labels, profile Profile, join ...string) *Membership {
	t.Helper()
	m, err := startNode(t, nw, host, Config{NodeID: id, Tags: labels, Join: join, Profile: profile})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return m
}

// startNode starts a member with cfg (its Transport set here) on host's
// port 7946 of nw, shut down when the test ends.
func startNode(t *testing.T, nw *memnet.Network, host string, cfg Config) (*Membership, error) {
	t.Helper()
	addr := host + ":7946"
	pc, err := nw.ListenPacket(addr)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := nw.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Transport, err = NewTransport(pc, ln, nw.DialFrom(host), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Start(ctx, cfg)
	if err != nil {
		_ = pc.Close()
		_ = ln.Close()
		return nil, err
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m, nil
}

// settle must be called first in a bubble: its cleanup runs last and lets
// fake time run on, so goroutines that Serf and memberlist leave behind after
// Shutdown (probe and dial timeouts) end before the bubble does (synctest
// stops the clock when the test function returns).
func settle(t *testing.T) {
	t.Cleanup(func() {
		time.Sleep(2 * time.Minute) // lint:sleep-ok advances fake time until lingering library timers fire
	})
}

// waitFor polls cond in the bubble's fake time and fails after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v", what, within)
		}
		time.Sleep(50 * time.Millisecond) // lint:sleep-ok polls in a synctest bubble's fake time
	}
}

// nextEvent waits for an event matching pred, discarding others.
func nextEvent(t *testing.T, m *Membership, within time.Duration, pred func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case e := <-m.Events():
			if pred(e) {
				return e
			}
		case <-timer.C:
			t.Fatalf("%s: no matching event within %v", m.ID(), within)
		}
	}
}

func memberByID(ms []Member, id string) (Member, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

func labelsFor(i int) Labels {
	host := fmt.Sprintf("10.0.0.%d", i)
	tier := TierEdge
	if i == 1 {
		tier = TierCore
	}
	return Labels{
		Site: fmt.Sprintf("site-%d", i), Zone: "z1", Tier: tier,
		MQTTAddr: host + ":1883", AdminAddr: host + ":8088", PeerAddr: host + ":7950",
	}
}

func TestJoinUpdateLeaveFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settle(t)
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		ms := make([]*Membership, 4)
		for i := range ms {
			var join []string
			if i > 0 {
				join = []string{"10.0.0.1:7946"}
			}
			ms[i] = node(t, nw, fmt.Sprintf("n%d", i+1), fmt.Sprintf("10.0.0.%d", i+1), labelsFor(i+1), LAN, join...)
		}
		start := time.Now()
		joined := map[string]bool{}
		for len(joined) < 4 {
			e := nextEvent(t, ms[0], 10*time.Second, func(e Event) bool { return e.Type == EventJoin })
			joined[e.Member.ID] = true
		}
		t.Logf("n1 saw 4 joins after %v", time.Since(start))

		// Every node sees every other's labels.
		waitFor(t, 30*time.Second, "all members known everywhere", func() bool {
			for _, m := range ms {
				if len(m.Members()) != 4 {
					return false
				}
			}
			return true
		})
		for _, m := range ms {
			for i := range 4 {
				got, _ := memberByID(m.Members(), fmt.Sprintf("n%d", i+1))
				if got.Labels != labelsFor(i+1) || got.State != StateAlive || got.Addr != fmt.Sprintf("10.0.0.%d:7946", i+1) {
					t.Errorf("%s sees %+v", m.ID(), got)
				}
			}
		}

		// A label change reaches the others as an update.
		changed := labelsFor(2)
		changed.Zone = "z9"
		if err := ms[1].SetLabels(changed); err != nil {
			t.Fatal(err)
		}
		e := nextEvent(t, ms[0], 10*time.Second, func(e Event) bool { return e.Type == EventUpdate && e.Member.ID == "n2" })
		if e.Member.Labels.Zone != "z9" {
			t.Errorf("update carries %+v", e.Member.Labels)
		}

		// A graceful leave.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ms[3].Leave(ctx); err != nil {
			t.Fatal(err)
		}
		_ = ms[3].Shutdown()
		nextEvent(t, ms[0], 10*time.Second, func(e Event) bool { return e.Type == EventLeave && e.Member.ID == "n4" })
		if got, _ := memberByID(ms[0].Members(), "n4"); got.State != StateLeft {
			t.Errorf("n4 after leave: %s", got.State)
		}

		// A node cut off from the network is detected as failed.
		nw.Isolate("10.0.0.3")
		cut := time.Now()
		nextEvent(t, ms[0], time.Minute, func(e Event) bool { return e.Type == EventFail && e.Member.ID == "n3" })
		t.Logf("n3 declared failed %v after isolation", time.Since(cut))
		waitFor(t, 30*time.Second, "n2 sees n3 failed", func() bool {
			got, _ := memberByID(ms[1].Members(), "n3")
			return got.State == StateFailed
		})
		_ = ms[2].Shutdown()
	})
}

func TestEventOverflowResyncs(t *testing.T) {
	m := &Membership{events: make(chan Event, 2)}
	for i := range 4 {
		m.emit(Event{Type: EventJoin, Member: Member{ID: fmt.Sprint(i)}})
	}
	if m.Dropped() != 2 {
		t.Fatalf("dropped %d, want 2", m.Dropped())
	}
	<-m.events
	<-m.events
	m.emit(Event{Type: EventFail, Member: Member{ID: "x"}})
	if e := <-m.events; e.Type != EventResync {
		t.Fatalf("after overflow got %v, want resync first", e.Type)
	}
	if e := <-m.events; e.Type != EventFail || e.Member.ID != "x" {
		t.Fatalf("then %+v", e)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{NodeID: "a", BindAddr: "127.0.0.1:7946", Tags: Labels{Tier: TierCore}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"space in id": {NodeID: "New York", BindAddr: "127.0.0.1:7946", Tags: Labels{Tier: TierCore}},
		"no id":       {BindAddr: "127.0.0.1:7946", Tags: Labels{Tier: TierCore}},
		"bad tier":    {NodeID: "a", BindAddr: "127.0.0.1:7946", Tags: Labels{Tier: "middle"}},
		"host name":   {NodeID: "a", BindAddr: "localhost:7946", Tags: Labels{Tier: TierEdge}},
		"huge labels": {NodeID: "a", BindAddr: "127.0.0.1:7946", Tags: Labels{Tier: TierEdge, Site: string(make([]byte, 600))}},
		"short key":   {NodeID: "a", BindAddr: "127.0.0.1:7946", Tags: Labels{Tier: TierEdge}, SecretKey: []byte("short")},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRealSockets starts one member on loopback with Serf's own UDP/TCP
// transport (the production path), outside any bubble.
func TestRealSockets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	labels := Labels{Site: "s", Zone: "z", Tier: TierCore, PeerAddr: "127.0.0.1:7950"}
	m, err := Start(ctx, Config{NodeID: "solo", BindAddr: "127.0.0.1:0", Tags: labels})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	ms := m.Members()
	if len(ms) != 1 || ms[0].ID != "solo" || ms[0].Labels != labels || ms[0].State != StateAlive {
		t.Fatalf("members %+v", ms)
	}
	if m.Coordinate() == nil {
		t.Error("no coordinate for self")
	}
	if d, ok := m.EstimateRTT("solo", "solo"); !ok || d != 0 {
		t.Errorf("EstimateRTT(self, self) = %v, %v", d, ok)
	}
	if _, ok := m.EstimateRTT("solo", "nobody"); ok {
		t.Error("EstimateRTT to an unknown member succeeded")
	}
}

// TestGossipKey: nodes sharing a gossip key form a cluster; a node with
// another key, or none, cannot join it.
func TestGossipKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settle(t)
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		key := []byte("0123456789abcdef0123456789abcdef")
		start := func(id, host string, key []byte, join ...string) (*Membership, error) {
			return startNode(t, nw, host, Config{NodeID: id, Tags: labelsFor(1), Join: join, SecretKey: key})
		}
		n1, err := start("n1", "10.0.0.1", key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := start("n2", "10.0.0.2", key, "10.0.0.1:7946"); err != nil {
			t.Fatalf("a node with the key: %v", err)
		}
		waitFor(t, 30*time.Second, "n2 joined", func() bool { return len(n1.Members()) == 2 })
		if _, err := start("n3", "10.0.0.3", []byte("another key, also thirty-two b.."), "10.0.0.1:7946"); err == nil {
			t.Fatal("a node with another key joined")
		}
		if _, err := start("n4", "10.0.0.4", nil, "10.0.0.1:7946"); err == nil {
			t.Fatal("a node without a key joined")
		}
		if n := len(n1.Members()); n != 2 {
			t.Fatalf("n1 sees %d members, want 2", n)
		}
	})
}

// TestMemberChangesAreLoggedAndRemembered: a node logs each other member's
// join, leave and failure once, at info (warn for a failure), with the
// gossip library's own narration of them kept out of an info-level log;
// and with a known-members file it records every other member it sees,
// keeps those that leave or fail (they may come back), forgets those
// removed, and a later run starts from the file.
func TestMemberChangesAreLoggedAndRemembered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settle(t)
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		log, out := logtest.New(slog.LevelInfo)
		path := filepath.Join(t.TempDir(), "members.json")
		n1, err := startNode(t, nw, "10.0.0.1", Config{NodeID: "n1", Tags: labelsFor(1), Logger: log, KnownFile: path})
		if err != nil {
			t.Fatal(err)
		}
		n2 := node(t, nw, "n2", "10.0.0.2", labelsFor(2), LAN, "10.0.0.1:7946")
		n3 := node(t, nw, "n3", "10.0.0.3", labelsFor(3), LAN, "10.0.0.1:7946")
		remembered := func() string {
			ms, err := LoadKnown(path)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, m := range ms {
				s = append(s, m.ID+"@"+m.Addr)
			}
			return strings.Join(s, " ")
		}
		waitFor(t, 30*time.Second, "n2 and n3 remembered", func() bool {
			return len(n1.Members()) == 3 && remembered() == "n2@10.0.0.2:7946 n3@10.0.0.3:7946"
		})

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n3.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		_ = n3.Shutdown()
		nextEvent(t, n1, 10*time.Second, func(e Event) bool { return e.Type == EventLeave && e.Member.ID == "n3" })
		nw.Isolate("10.0.0.2")
		nextEvent(t, n1, time.Minute, func(e Event) bool { return e.Type == EventFail && e.Member.ID == "n2" })
		if got := remembered(); got != "n2@10.0.0.2:7946 n3@10.0.0.3:7946" {
			t.Fatalf("after a leave and a failure: %q; both must stay", got)
		}
		if err := n1.RemoveFailed("n2"); err != nil {
			t.Fatal(err)
		}
		nextEvent(t, n1, time.Minute, func(e Event) bool { return e.Type == EventReap && e.Member.ID == "n2" })
		if got := remembered(); got != "n3@10.0.0.3:7946" {
			t.Fatalf("after removing n2: %q", got)
		}
		_ = n2.Shutdown()
		_ = n1.Shutdown()

		logged := out.String()
		for _, want := range []string{
			`level=INFO msg="cluster member joined" member=n2 addr=10.0.0.2:7946`,
			`level=INFO msg="cluster member joined" member=n3 addr=10.0.0.3:7946`,
			`level=INFO msg="cluster member left" member=n3 addr=10.0.0.3:7946`,
			`level=WARN msg="cluster member failed: it stopped answering gossip probes" member=n2 addr=10.0.0.2:7946`,
			`level=INFO msg="cluster member forgotten: gone long enough, or removed by an operator" member=n2`,
		} {
			if n := strings.Count(logged, want); n != 1 {
				t.Errorf("%d lines with %s; want 1", n, want)
			}
		}
		for _, chatter := range []string{"EventMember", "Suspect", "Marking", "member=n1"} {
			if strings.Contains(logged, chatter) {
				t.Errorf("the log has %q", chatter)
			}
		}
		if t.Failed() {
			t.Logf("log:\n%s", logged)
		}

		// The next run starts from the file: an event about another member
		// adds to it, not replaces it.
		k := newKnown(path, "n1", slog.New(slog.DiscardHandler))
		k.note(Event{Type: EventJoin, Member: Member{ID: "n4", Addr: "10.0.0.4:7946"}})
		if got := remembered(); got != "n3@10.0.0.3:7946 n4@10.0.0.4:7946" {
			t.Fatalf("the next run: %q", got)
		}
	})
}
