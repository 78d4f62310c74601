package clustertest

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// plPublisher publishes QoS 1 messages to a topic every gap from whichever
// client it holds (none: it skips), recording each in k. Its lock is never
// held while waiting: a goroutine blocked on a mutex would keep the
// bubble's fake time from advancing.
type plPublisher struct {
	k     *SeqChecker
	topic string
	mu    sync.Mutex
	cl    *Client
	n     int
}

// swap replaces the client, returning the previous one.
func (p *plPublisher) swap(cl *Client) *Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.cl
	p.cl = cl
	return old
}

func (p *plPublisher) run(stop <-chan struct{}, gap time.Duration, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.mu.Lock()
			cl := p.cl
			payload := fmt.Sprintf("m-%05d", p.n)
			if cl != nil {
				p.n++
			}
			p.mu.Unlock()
			if cl != nil {
				p.k.Published(cl.ID, payload, 1)
				if code, err := cl.TryPublish(p.topic, 1, false, payload); err == nil && code == packet.Success {
					p.k.Acked(payload)
				}
			}
			tm := time.NewTimer(gap)
			<-tm.C
		}
	}()
}

// plCollect records cl's messages of the topic in k until stop, except a
// QoS 1 message sent again (Dup) with an index the subscriber already has:
// MQTT allows that after the client's own reconnect. Those are counted in
// redelivered[migrating()], so a test can allow them when the clients
// moved and refuse them while the group migrates.
func plCollect(k *SeqChecker, cl *Client, stop <-chan struct{}, wg *sync.WaitGroup, last map[string]uint64, mu *sync.Mutex, redelivered *[2]int, migrating func() bool) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case m := <-cl.Msgs:
				mu.Lock()
				if m.Dup && m.Index != 0 && m.Index <= last[cl.ID] {
					i := 0
					if migrating() {
						i = 1
					}
					redelivered[i]++
					mu.Unlock()
					continue
				}
				last[cl.ID] = max(last[cl.ID], m.Index)
				mu.Unlock()
				k.Received(cl.ID, m)
			case <-stop:
				return
			}
		}
	}()
}

// TestPlacementFollowsMovingSwarm is the mobility experiment of issue 15
// on five in-process nodes whose links have the round-trip times
// WonderNetwork measured between five US cities. A swarm (one publisher,
// two subscribers with persistent sessions) starts in Seattle; the group of
// its topic is homed there. The swarm then moves to Miami (its clients
// disconnect and connect to the Miami node, as drones changing MEC zone;
// the subscribers resume their sessions). Within a few placement intervals
// the leader's placement manager records a decision, reason violation,
// homing the group in Miami; the migration executor moves it; E(t) on its
// new home is back under the rule's latency_ms. The checker finds no
// acknowledged message lost, none duplicated (beyond the QoS 1 resends the
// swarm's own reconnection allows, before the migration), one order; and
// no client connected again or lost its connection while the group moved.
func TestPlacementFollowsMovingSwarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cities := []string{"Seattle", "Los Angeles", "Dallas", "Chicago", "Miami"}
		rtt := plCityRTTs(t, cities)
		const interval = time.Second
		c := Start(t, len(cities), rtt, plOptions(interval, 3, 5*time.Second, nil))
		const lth = 25 * time.Millisecond
		c.SetPolicy(fsm.Rule{Match: "swarm/#", Mode: fsm.Sequenced, Replicas: 1, LatencyMS: int(lth / time.Millisecond)})
		c.plCoordinatesSettle(rtt)
		mgr := c.plManager()

		const topic = "swarm/telemetry"
		k := NewSeqChecker(topic)
		stop, pubStop := make(chan struct{}), make(chan struct{})
		var wg, pwg sync.WaitGroup
		stopPub := sync.OnceFunc(func() { close(pubStop); pwg.Wait() })
		stopSubs := sync.OnceFunc(func() { close(stop); wg.Wait() })
		defer stopSubs() // also when the test fails early
		defer stopPub()
		var (
			mu          sync.Mutex
			last        = map[string]uint64{}
			redelivered [2]int
			migrating   bool
		)
		isMigrating := func() bool { return migrating } // read under mu
		var subs []*Client
		subscribe := func(at int, resume bool, ids ...string) {
			for _, id := range ids {
				s := c.Node(at).Connect(id, ConnectOptions{SessionExpiry: 600, Resume: resume})
				if !resume {
					s.Subscribe(1, "swarm/#")
				}
				plCollect(k, s, stop, &wg, last, &mu, &redelivered, isMigrating)
				subs = append(subs, s)
			}
		}
		subscribe(0, false, "drone-a", "drone-b")
		pub := &plPublisher{k: k, topic: topic, cl: c.Node(0).Connect("drone-pub", ConnectOptions{})}
		pub.run(pubStop, 100*time.Millisecond, &pwg)

		var gid string
		c.Eventually("the group homed in Seattle, watched and not violated", func() bool {
			g, ok := plGroupOf(c.Node(0), topic)
			if !ok {
				return false
			}
			gid = g.ID
			gs, ok := plGroup(mgr.Status(), g.ID)
			// Rates: the publishes (Published) and the feed's records
			// for the subscribers (Delivered) were counted.
			return ok && g.Home == "n1" && gs.Producers == 1 && gs.Consumers == 2 && gs.Rates.In > 0 && gs.Rates.Out > 0 && !gs.Violated
		})
		before, _ := plGroup(mgr.Status(), gid)
		t.Logf("in Seattle: home %s, E(t) %v, Lth %v, rates in %.1f/s, out %.1f/s", before.Home, before.Worst, before.Threshold, before.Rates.In, before.Rates.Out)
		if before.Threshold != lth {
			t.Fatalf("Lth %v, want the rule's latency_ms %v", before.Threshold, lth)
		}
		decided := mgr.Status().Proposed

		// The swarm moves to Miami: every client leaves Seattle, then
		// connects in Miami.
		moved := time.Now()
		pub.swap(nil).Close()
		for _, s := range subs {
			s.Close()
		}
		subs = nil
		subscribe(4, true, "drone-a", "drone-b")
		pub.swap(c.Node(4).Connect("drone-pub", ConnectOptions{}))
		connects := func() float64 {
			n := 0.0
			for _, nd := range c.Nodes() {
				n += nd.Gather("sextant_connections_total", nil)
			}
			return n
		}
		connectsAfterMove := connects()

		var violated time.Duration
		var lastRound uint64
		c.Eventually("a decision homing the group in Miami", func() bool {
			if st := mgr.Status(); st.Round != lastRound {
				lastRound = st.Round
				for _, d := range st.Decisions {
					t.Logf("%v after the move: decision %+v", time.Since(moved), d)
				}
			}
			if gs, ok := plGroup(mgr.Status(), gid); ok && gs.Violated && violated == 0 {
				violated = time.Since(moved)
				t.Logf("violation seen %v after the move: E(t) %v on %s, Lth %v", violated, gs.Worst, gs.Home, gs.Threshold)
			}
			g, ok := plGroupOf(c.Node(0), topic)
			if ok && g.Desired != nil {
				mu.Lock()
				migrating = true
				mu.Unlock()
			}
			return ok && (g.Desired != nil && g.Desired.Home == "n5" || g.Home == "n5")
		})
		decidedAfter := time.Since(moved)
		mu.Lock()
		migrating = true
		mu.Unlock()
		c.Eventually("the group homed in Miami", func() bool {
			g, ok := plGroupOf(c.Node(0), topic)
			return ok && g.Home == "n5" && g.Desired == nil
		})
		homedAfter := time.Since(moved)
		g, _ := plGroupOf(c.Node(0), topic)
		if g.HomeReason != fsm.ReasonMigration {
			t.Errorf("home reason %q, want %q", g.HomeReason, fsm.ReasonMigration)
		}
		c.Eventually("E(t) on the new home under Lth", func() bool {
			gs, ok := plGroup(mgr.Status(), gid)
			return ok && gs.Home == "n5" && gs.Worst <= lth && !gs.Violated
		})
		after, _ := plGroup(mgr.Status(), gid)
		t.Logf("after the move: decision %v (%.1f placement intervals), group homed in Miami %v; E(t) there %v (was %v in Seattle before the move), Lth %v",
			decidedAfter, decidedAfter.Seconds()/interval.Seconds(), homedAfter, after.Worst, before.Worst, lth)
		if n := mgr.Status().Proposed - decided; n != 1 {
			t.Errorf("%d decisions recorded after the move, want 1 (the record: %+v)", n, g)
		}

		// Traffic goes on a while on the new home, then the checker.
		more := time.NewTimer(2 * time.Second)
		<-more.C
		stopPub()
		var ids []string
		for _, s := range subs {
			ids = append(ids, s.ID)
			c.Eventually(s.ID+" has every acknowledged publish", func() bool { return k.Has(s.ID) })
		}
		stopSubs()
		for _, err := range k.Verify(ids, ids, []string{"drone-pub"}) {
			t.Error(err)
		}
		if redelivered[1] != 0 {
			t.Errorf("%d QoS 1 messages sent again while the group migrated", redelivered[1])
		}
		if n := connects(); n != connectsAfterMove {
			t.Errorf("%v client connections since the swarm moved, want none", n-connectsAfterMove)
		}
		for _, cl := range append(subs, pub.swap(nil)) {
			select {
			case <-cl.Done:
				t.Errorf("client %s lost its connection", cl.ID)
			default:
			}
		}
		for _, nd := range c.Nodes() {
			for _, m := range nd.Node.Migrations().Migrations() {
				t.Logf("migration on %s: %s %s -> %s %s (%s): total %v, pause %v", nd.ID, m.Group, m.From, m.To, m.Kind, m.State, m.Total, m.Pause)
			}
		}
		t.Logf("%d publishes acknowledged, %d resent to the subscribers after their own reconnection (none during the migration)", k.AckedCount(), redelivered[0])

		for _, n := range c.Nodes() {
			if n.Node.Meta().IsLeader() {
				rounds, violations := n.Gather("sextant_placement_rounds_total", nil), n.Gather("sextant_placement_violations_total", nil)
				decisions := n.Gather("sextant_placement_decisions_total", nil)
				t.Logf("leader %s: %v rounds, %v violations, %v decisions", n.ID, rounds, violations, decisions)
				if rounds == 0 || violations < 1 || decisions < 1 {
					t.Errorf("leader metrics: %v rounds, %v violations, %v decisions; want some of each", rounds, violations, decisions)
				}
			}
		}
		info := c.Node(2).Node.Placement(t.Context())
		if len(info.Groups) != 1 || info.Groups[0].Home != "n5" || info.Groups[0].LastMove == nil || info.Groups[0].LastMove.Reason != string(fsm.ReasonMigration) || info.Leader == "" {
			t.Errorf("/v1/placement on n3: %+v", info)
		}
	})
}
