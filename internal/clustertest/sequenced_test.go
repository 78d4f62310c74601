package clustertest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestSequencedAcrossNodes: for replicas 1 and 3, QoS 1 messages published
// on one node reach subscribers on every node (the publisher's own
// included), in publish order, each with its sx-index, gap-free from 1.
func TestSequencedAcrossNodes(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := Start(t, 3, nil, coreNodes)
				c.SetPolicy(fsm.Rule{Match: "seq/#", Mode: fsm.Sequenced, Replicas: replicas})
				var subs []*Client
				for i, n := range c.Nodes() {
					s := n.Connect(fmt.Sprintf("sub%d", i), ConnectOptions{})
					s.Subscribe(1, "seq/#")
					subs = append(subs, s)
				}
				pub := c.Node(1).Connect("pub", ConnectOptions{})
				const total = 50
				for i := range total {
					if code := pub.Publish("seq/a", 1, false, fmt.Sprint(i)); code != packet.Success {
						t.Fatalf("publish %d: %v", i, code)
					}
				}
				for _, s := range subs {
					for i, m := range s.Collect(total) {
						if m.Payload != fmt.Sprint(i) || m.Index != uint64(i+1) || m.Topic != "seq/a" {
							t.Fatalf("%s: message %d: %v index %d", s.ID, i, m, m.Index)
						}
					}
				}
			})
		})
	}
}

// publishStream publishes payloads from cl to topic, at most window in
// flight, one every gap, recording each attempt and acknowledgement in k.
// It returns the payloads not acknowledged (the connection ended first).
func publishStream(k *SeqChecker, cl *Client, topic string, qos byte, payloads []string, window int, gap time.Duration) (unacked []string) {
	slots := make(chan struct{}, window)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range payloads {
		slots <- struct{}{}
		k.Published(cl.ID, p, qos)
		_, res := cl.PublishAsync(topic, qos, p, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := <-res
			if r.Err == nil && r.Code == packet.Success {
				k.Acked(p)
			} else {
				mu.Lock()
				unacked = append(unacked, p)
				mu.Unlock()
			}
			<-slots
		}()
		time.Sleep(gap) // lint:sleep-ok fake time: the publisher's pace
	}
	wg.Wait()
	return unacked
}

// collect records every message cl receives in k until stop is closed.
func collect(k *SeqChecker, cl *Client, stop <-chan struct{}, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case m := <-cl.Msgs:
				k.Received(cl.ID, m)
			case <-stop:
				return
			}
		}
	}()
}

func payloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// TestSequencedTotalOrder: publishers on three nodes (QoS 1 and 2, each
// with a window of messages in flight) and subscribers on three nodes: every
// subscriber gets every message, all in one order, each publisher's in
// the order it sent them, indexes gap-free, QoS 2 once.
func TestSequencedTotalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 4, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "ord/#", Mode: fsm.Sequenced, Replicas: 3})
		k := NewSeqChecker("ord/t")
		stop := make(chan struct{})
		var cwg sync.WaitGroup
		var subs []string
		for _, i := range []int{1, 2, 3} {
			s := c.Node(i).Connect(fmt.Sprintf("sub%d", i), ConnectOptions{})
			s.Subscribe(2, "ord/#")
			collect(k, s, stop, &cwg)
			subs = append(subs, s.ID)
		}
		var wg sync.WaitGroup
		var pubs []string
		for i, qos := range []byte{1, 2, 1} {
			cl := c.Node(i).Connect(fmt.Sprintf("pub%d", i), ConnectOptions{})
			pubs = append(pubs, cl.ID)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if un := publishStream(k, cl, "ord/t", qos, payloads(cl.ID, 150), 16, time.Millisecond); len(un) > 0 {
					t.Errorf("%s: %d publishes not acknowledged", cl.ID, len(un))
				}
			}()
		}
		wg.Wait()
		for _, s := range subs {
			c.Eventually(s+" has every acknowledged publish", func() bool { return k.Has(s) })
		}
		close(stop)
		cwg.Wait()
		for _, err := range k.Verify(subs, subs, pubs) {
			t.Error(err)
		}
		t.Logf("%d publishes acknowledged and delivered to %d subscribers", k.AckedCount(), len(subs))
	})
}

// TestSequencedFailover: a replicas 3 group's home is killed (node Halt: no
// graceful leave) while QoS 1 and QoS 2 publishers on other nodes stream
// to it, each with a window in flight, and a QoS 1 publisher on the home
// itself loses its connection (it publishes its unacknowledged messages
// again through another node). Another replica becomes the leader and the
// home, the access nodes re-route on their own and send again what was
// not acknowledged, with its keys; the feeds move to the new home. The
// checker then finds nothing acknowledged lost, indexes gap-free, one
// order for every subscriber, QoS 2 publishes once and each surviving
// publisher's messages in its order.
func TestSequencedFailover(t *testing.T) {
	seed := testSeed(t)
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 0))
		c := Start(t, 4, nil, coreNodes, func(o *Options) { o.Seed = seed })
		c.SetPolicy(fsm.Rule{Match: "fo/#", Mode: fsm.Sequenced, Replicas: 3})
		const victim = 1
		k := NewSeqChecker("fo/t")
		// The group is created by its first publish, on the victim: its
		// home is the victim.
		first := c.Node(victim).Connect("first", ConnectOptions{})
		k.Published(first.ID, "first", 1)
		if code := first.Publish("fo/t", 1, false, "first"); code != packet.Success {
			t.Fatalf("first publish: %v", code)
		}
		k.Acked("first")
		rec, _ := c.Node(0).Node.Meta().State().Group("fo/t")
		if rec.Home != c.Node(victim).ID {
			t.Fatalf("group home %s, want the first publisher's node %s", rec.Home, c.Node(victim).ID)
		}
		stop := make(chan struct{})
		var cwg sync.WaitGroup
		var subs, survivors []string
		for i := range c.Nodes() {
			s := c.Node(i).Connect(fmt.Sprintf("sub%d", i), ConnectOptions{})
			s.Subscribe(2, "fo/#")
			collect(k, s, stop, &cwg)
			subs = append(subs, s.ID)
			if i != victim {
				survivors = append(survivors, s.ID)
			}
		}
		var wg sync.WaitGroup
		const n = 300
		var inOrder []string
		for _, p := range []struct {
			node int
			qos  byte
		}{{0, 1}, {2, 2}, {3, 2}} {
			cl := c.Node(p.node).Connect(fmt.Sprintf("pub%d-q%d", p.node, p.qos), ConnectOptions{})
			inOrder = append(inOrder, cl.ID)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if un := publishStream(k, cl, "fo/t", p.qos, payloads(cl.ID, n), 32, 2*time.Millisecond); len(un) > 0 {
					t.Errorf("%s: %d publishes not acknowledged", cl.ID, len(un))
				}
			}()
		}
		// The home's own publisher: its connection dies with the node; it
		// publishes what was not acknowledged again through node 3.
		local := c.Node(victim).Connect("pub-home", ConnectOptions{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			un := publishStream(k, local, "fo/t", 1, payloads(local.ID, n), 32, 2*time.Millisecond)
			again := c.Node(3).Connect("pub-home-again", ConnectOptions{})
			if un2 := publishStream(k, again, "fo/t", 1, un, 32, 0); len(un2) > 0 {
				t.Errorf("%s: %d publishes not acknowledged through another node", again.ID, len(un2))
			}
			t.Logf("the home's publisher sent %d unacknowledged publishes again", len(un))
		}()
		killAt := time.Duration(100+rng.IntN(300)) * time.Millisecond
		time.Sleep(killAt) // lint:sleep-ok fake time: the kill's point in the streams, from the seed
		t.Logf("seed %d: killing %s (the home) %v into the streams", seed, c.Node(victim).ID, killAt)
		killed := time.Now()
		c.Kill(victim)
		wg.Wait()
		t.Logf("publishers done %v after the kill; the longest time without an acknowledgement after it: %v",
			time.Since(killed), k.LongestAckGap(killed))
		for _, s := range survivors {
			c.Eventually(s+" has every acknowledged publish", func() bool { return k.Has(s) })
		}
		close(stop)
		cwg.Wait()
		m := c.Node(0).Node.Meta()
		c.Eventually("a new home recorded", func() bool {
			g, _ := m.State().Group("fo/t")
			return g.Home != c.Node(victim).ID && g.HomeReason == fsm.ReasonFailover
		})
		for _, err := range k.Verify(subs, survivors, inOrder) {
			t.Error(err)
		}
		var dups, retries float64
		for _, nd := range c.Nodes() {
			if nd.Running() {
				dups += nd.Gather("sextant_sequenced_publishes_total", map[string]string{"result": "duplicate"})
				retries += nd.Gather("sextant_sequenced_retries_total", nil)
			}
		}
		t.Logf("%d publishes acknowledged; access nodes sent %v batches again, %v publishes were recognised as retries of committed ones",
			k.AckedCount(), retries, dups)
	})
}

// testSeed returns the seed of a randomised test: SEXTANT_TEST_SEED if
// set, else 1. It is printed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(1)
	if s := os.Getenv("SEXTANT_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SEXTANT_TEST_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (set SEXTANT_TEST_SEED to change it)", seed)
	return seed
}

// TestSequencedNewGroupQoS0Burst: a publisher's first messages to a new
// sequenced topic are a QoS 0 burst. The access node creates the group
// and sends the burst at once, before the home's (and the other voters')
// replica of the new group has opened, and while the group's first
// election may choose another voter than the home: every message reaches
// the subscriber, in order, and none is counted dropped. (The home
// answered no_replica, or another voter took a batch and handed the lead
// to the home with it in flight, and the access node dropped the QoS 0
// messages sent, counted as failover: 9 of 10 runs lost some or all.)
func TestSequencedNewGroupQoS0Burst(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := Start(t, 3, nil, coreNodes)
				c.SetPolicy(fsm.Rule{Match: "burst/#", Mode: fsm.Sequenced, Replicas: replicas})
				sub := c.Node(0).Connect("sub", ConnectOptions{})
				sub.Subscribe(0, "burst/#")
				time.Sleep(time.Second) // lint:sleep-ok fake time: the subscription's interest reaches the nodes
				pub := c.Node(1).Connect("pub", ConnectOptions{})
				const total = 200
				for i := range total {
					pub.Publish("burst/a", 0, false, fmt.Sprint(i))
				}
				time.Sleep(10 * time.Second) // lint:sleep-ok fake time: QoS 0 has no acknowledgement to wait for
				got := sub.Pending()
				if d := c.Node(1).Gather("sextant_sequenced_dropped_total", nil); d != 0 {
					t.Errorf("the access node dropped %v publishes", d)
				}
				for _, r := range []string{"link", "not_leader", "no_replica", "stale", "unknown"} {
					if n := c.Node(1).Gather("sextant_sequenced_retries_total", map[string]string{"reason": r}); n > 0 {
						t.Logf("batches sent again after %s: %v", r, n)
					}
				}
				for i, m := range got {
					if m.Payload != fmt.Sprint(i) || m.Index != uint64(i+1) {
						t.Fatalf("message %d of %d received: %v index %d", i, len(got), m, m.Index)
					}
				}
				if len(got) != total {
					t.Fatalf("%d messages received of %d", len(got), total)
				}
			})
		})
	}
}
