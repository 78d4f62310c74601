package peer

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sextantmq/sextant/internal/memnet"
)

// cluster is a set of managers on one memnet network, every pair linked,
// with an RTT matrix that is also their round-trip estimate.
type cluster struct {
	t     *testing.T
	nw    *memnet.Network
	nodes map[string]*testNode
	hosts map[string]string
	rtt   map[[2]string]time.Duration
	mu    sync.Mutex
}

// startCluster starts managers for ids (host 10.0.0.<i+1>), links every
// pair and waits until every link is up and every path direct.
func startCluster(t *testing.T, nw *memnet.Network, opts Options, ids ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, nw: nw, nodes: map[string]*testNode{}, hosts: map[string]string{}, rtt: map[[2]string]time.Duration{}}
	for i, id := range ids {
		c.hosts[id] = fmt.Sprintf("10.0.0.%d", i+1)
	}
	for _, id := range ids {
		c.nodes[id] = startNodeWith(t, nw, id, c.hosts[id], opts, nil, c.estimate)
	}
	for _, a := range ids {
		for _, b := range ids {
			if a != b {
				c.nodes[a].mgr.Add(b, c.hosts[b]+":7000")
			}
		}
	}
	eventually(t, 30*time.Second, "every path direct", func() bool {
		for _, a := range ids {
			for _, b := range ids {
				if a != b && c.nodes[a].mgr.Link(b).path.Load() != pathDirect {
					return false
				}
			}
		}
		return true
	})
	return c
}

// setRTT sets the round trip between two nodes, on the network and in the
// estimate.
func (c *cluster) setRTT(a, b string, d time.Duration) {
	c.nw.SetRTT(c.hosts[a], c.hosts[b], d)
	c.mu.Lock()
	c.rtt[[2]string{a, b}], c.rtt[[2]string{b, a}] = d, d
	c.mu.Unlock()
}

func (c *cluster) estimate(a, b string) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.rtt[[2]string{a, b}]
	return d, ok
}

func (c *cluster) partition(a, b string) { c.nw.Partition(c.hosts[a], c.hosts[b]) }
func (c *cluster) heal(a, b string)      { c.nw.Heal(c.hosts[a], c.hosts[b]) }

// stream publishes n messages from one node to another, one every gap,
// QoS cycling 0, 1, 2, named "<from>><to>/<i>/q<qos>".
func stream(c *cluster, from, to string, n int, gap time.Duration) {
	for i := range n {
		q := byte(i % 3)
		c.nodes[from].mgr.Publish(to, &Publish{Msg: []byte(fmt.Sprintf("%s>%s/%d/q%d", from, to, i, q)), QoS: q, Direct: true})
		time.Sleep(gap) // lint:sleep-ok paces the stream in the bubble's fake time
	}
}

// checkStream checks what node `to` received from `from`: every QoS 1/2
// message exactly once and in order, QoS 0 ones at most once and in order
// among themselves (a QoS 0 message may pass a QoS 1/2 one across a path
// change: MQTT orders messages of the same QoS).
// It returns how many QoS 0 messages were missing.
func checkStream(t *testing.T, c *cluster, from, to string, n int) (missingQoS0 int) {
	t.Helper()
	prefix := "true|[]|" + from + ">" + to + "/"
	want := 0
	for i := range n {
		if i%3 != 0 {
			want++
		}
	}
	var got []int
	eventually(t, 10*time.Minute, fmt.Sprintf("%s's QoS 1/2 messages at %s", from, to), func() bool {
		p, _, _ := c.nodes[to].rec.snapshot()
		got = got[:0]
		acked := 0
		for _, s := range p {
			rest, ok := strings.CutPrefix(s, prefix)
			if !ok {
				continue
			}
			i, _ := strconv.Atoi(strings.Split(rest, "/")[0])
			got = append(got, i)
			if i%3 != 0 {
				acked++
			}
		}
		return acked >= want
	})
	seen := map[int]bool{}
	last := [2]int{-1, -1} // per class: QoS 0, and QoS 1/2 (MQTT orders messages of one QoS)
	for _, i := range got {
		if seen[i] {
			t.Errorf("%s>%s: message %d delivered twice", from, to, i)
		}
		class := min(i%3, 1)
		if i <= last[class] {
			t.Errorf("%s>%s: message %d after %d", from, to, i, last[class])
		}
		seen[i], last[class] = true, i
	}
	for i := range n {
		if !seen[i] {
			if i%3 != 0 {
				t.Errorf("%s>%s: QoS %d message %d lost", from, to, i%3, i)
			} else {
				missingQoS0++
			}
		}
	}
	return missingQoS0
}

func counter(n *testNode, name string, labels ...string) float64 {
	m := n.mgr.metrics
	switch name {
	case "resent":
		return testutil.ToFloat64(m.resent.WithLabelValues(labels...))
	case "duplicates":
		return testutil.ToFloat64(m.duplicates.WithLabelValues(labels...))
	case "early":
		return testutil.ToFloat64(m.early.WithLabelValues(labels...))
	case "transit":
		return testutil.ToFloat64(m.transitForwarded.WithLabelValues(labels...))
	case "transitDropped":
		return testutil.ToFloat64(m.transitDropped.WithLabelValues(labels...))
	case "dropped":
		return testutil.ToFloat64(m.dropped.WithLabelValues(labels...))
	}
	panic(name)
}

// TestAckedStreamAcrossBreaks: while a streams QoS 0, 1 and 2 messages to
// b (and b to a), their connection is broken, cut long enough to be reset,
// and cut briefly (it stalls and resumes). Every QoS 1/2 message arrives
// exactly once and in order; what was in flight on a broken connection was
// sent again.
func TestAckedStreamAcrossBreaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seed := uint64(11)
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, seed))
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond, BreakAfter: 2 * time.Second, Seed: seed})
		defer nw.Close()
		c := startCluster(t, nw, Options{}, "a", "b")
		const n = 3000
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); stream(c, "a", "b", n, 5*time.Millisecond) }()
		go func() { defer wg.Done(); stream(c, "b", "a", n, 5*time.Millisecond) }()
		for range 6 {
			time.Sleep(time.Duration(200+r.IntN(800)) * time.Millisecond) // lint:sleep-ok fake time: between faults
			switch r.IntN(3) {
			case 0:
				nw.Break("10.0.0.1", "10.0.0.2")
			case 1: // longer than BreakAfter: the connection is reset
				c.partition("a", "b")
				time.Sleep(3 * time.Second) // lint:sleep-ok fake time: the cut lasts
				c.heal("a", "b")
			default: // a stall the connection survives
				c.partition("a", "b")
				time.Sleep(time.Duration(100+r.IntN(500)) * time.Millisecond) // lint:sleep-ok fake time: the cut lasts
				c.heal("a", "b")
			}
		}
		wg.Wait()
		for _, d := range [][2]string{{"a", "b"}, {"b", "a"}} {
			lost0 := checkStream(t, c, d[0], d[1], n)
			t.Logf("%s>%s: %d of %d QoS 0 messages lost, %v QoS 1/2 messages sent again, %v duplicates skipped",
				d[0], d[1], lost0, n/3, counter(c.nodes[d[0]], "resent", d[1]), counter(c.nodes[d[1]], "duplicates", d[0]))
		}
		if counter(c.nodes["a"], "resent", "b")+counter(c.nodes["b"], "resent", "a") == 0 {
			t.Error("nothing was sent again: the faults did not hit the streams")
		}
	})
}

// TestTransitAroundPartialPartition: a and c cannot reach each other, both
// reach b and d. a's messages for c (and c's acknowledgements and messages
// for a) go through the transit node with the lowest estimated round trip,
// b, not d; retained updates take the same path; b then loses its
// connection to c with frames on their way (d carries the traffic until b
// reconnects); nothing is lost, duplicated or reordered across the
// switches; and as soon as the direct link is back, transit stops.
func TestTransitAroundPartialPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		c := startClusterRTT(t, nw, map[[2]string]time.Duration{
			{"a", "b"}: 10 * time.Millisecond, {"b", "c"}: 10 * time.Millisecond,
			{"a", "d"}: 5 * time.Millisecond, {"d", "c"}: 40 * time.Millisecond,
			{"a", "c"}: 10 * time.Millisecond, {"b", "d"}: 10 * time.Millisecond,
		}, "a", "b", "c", "d")
		a, b, cc, d := c.nodes["a"], c.nodes["b"], c.nodes["c"], c.nodes["d"]
		const n = 1500
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); stream(c, "a", "c", n, 10*time.Millisecond) }()
		go func() { defer wg.Done(); stream(c, "c", "a", n, 10*time.Millisecond) }()
		time.Sleep(2 * time.Second) // lint:sleep-ok fake time: the streams run direct first
		c.partition("a", "c")
		eventually(t, 10*time.Second, "a reaches c through b", func() bool {
			return a.mgr.Transit("c") == "b" && cc.mgr.Transit("a") == "b"
		})
		if !a.mgr.Reachable("c") {
			t.Error("c not reachable from a through a transit node")
		}
		if !a.mgr.Link("c").SendRetained([]byte("retained-through-b")) {
			t.Error("a retained update for c was not sent through the transit node")
		}
		eventually(t, 10*time.Second, "retained update through b", func() bool {
			_, r, _ := cc.rec.snapshot()
			return len(r) > 0 && r[len(r)-1] == "retained-through-b"
		})
		time.Sleep(2 * time.Second) // lint:sleep-ok fake time: the streams run through b
		if viaD := counter(d, "transit", "c") + counter(d, "transit", "a"); viaD != 0 {
			t.Errorf("d (the slower transit node) passed on %v frames while b could", viaD)
		}
		// The transit node loses its connection to c with frames on their
		// way: c sees later messages before the lost ones (skipped, then
		// sent again after the resend timeout).
		nw.Break(c.hosts["b"], c.hosts["c"])
		time.Sleep(5 * time.Second) // lint:sleep-ok fake time: the streams run through b
		c.heal("a", "c")
		eventually(t, 10*time.Second, "direct again", func() bool {
			return a.mgr.Link("c").path.Load() == pathDirect && cc.mgr.Link("a").path.Load() == pathDirect
		})
		// What was on its way through b when the paths switched arrives
		// within a round trip; nothing goes through b after that.
		time.Sleep(100 * time.Millisecond) // lint:sleep-ok fake time: a few round trips
		viaB := counter(b, "transit", "c") + counter(b, "transit", "a")
		wg.Wait()
		checkStream(t, c, "a", "c", n)
		checkStream(t, c, "c", "a", n)
		if viaB == 0 {
			t.Error("b passed nothing on")
		}
		if after := counter(b, "transit", "c") + counter(b, "transit", "a"); after != viaB {
			t.Errorf("b passed on %v frames after the direct link was back", after-viaB)
		}
		t.Logf("b passed on %v frames; a sent %v messages again, c skipped %v duplicates and %v early messages",
			viaB, counter(a, "resent", "c"), counter(cc, "duplicates", "a"), counter(cc, "early", "a"))
	})
}

// startClusterRTT is startCluster with an RTT matrix (also the estimate).
func startClusterRTT(t *testing.T, nw *memnet.Network, rtt map[[2]string]time.Duration, ids ...string) *cluster {
	t.Helper()
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			d, ok := rtt[[2]string{a, b}]
			if !ok {
				d = rtt[[2]string{b, a}]
			}
			nw.SetRTT(fmt.Sprintf("10.0.0.%d", i+1), fmt.Sprintf("10.0.0.%d", indexOf(ids, b)+1), d)
		}
	}
	c := startCluster(t, nw, Options{}, ids...)
	c.mu.Lock()
	for k, d := range rtt {
		c.rtt[k], c.rtt[[2]string{k[1], k[0]}] = d, d
	}
	c.mu.Unlock()
	return c
}

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// TestTransitOneWayCut: traffic from a to c is cut, c to a still flows. c
// stops hearing a and says so; a, which still hears c, learns from c's
// reach announcement that c does not hear it, and both go through b.
func TestTransitOneWayCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond, BreakAfter: time.Hour})
		defer nw.Close()
		c := startCluster(t, nw, Options{}, "a", "b", "c")
		a, cc := c.nodes["a"], c.nodes["c"]
		const n = 900
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); stream(c, "a", "c", n, 10*time.Millisecond) }()
		go func() { defer wg.Done(); stream(c, "c", "a", n, 10*time.Millisecond) }()
		time.Sleep(time.Second) // lint:sleep-ok fake time: direct first
		nw.CutOneWay(c.hosts["a"], c.hosts["c"])
		eventually(t, 10*time.Second, "both through b", func() bool {
			return a.mgr.Transit("c") == "b" && cc.mgr.Transit("a") == "b"
		})
		if !a.mgr.Link("c").Up() {
			t.Error("the connection closed: the test no longer shows a one-way cut on a live connection")
		}
		time.Sleep(3 * time.Second) // lint:sleep-ok fake time: through b for a while
		c.heal("a", "c")
		wg.Wait()
		checkStream(t, c, "a", "c", n)
		checkStream(t, c, "c", "a", n)
	})
}

// TestTransitChoosesAReachingNode: a transit node that cannot send to the
// destination is never chosen; with none left, the destination has no path
// and QoS 1/2 messages wait in the outbox (within its bound) until one
// appears.
func TestTransitChoosesAReachingNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		c := startCluster(t, nw, Options{}, "a", "b", "c", "d")
		a := c.nodes["a"]
		c.setRTT("a", "b", time.Millisecond) // b would be the best, if it reached c
		c.partition("a", "c")
		c.partition("b", "c")
		eventually(t, 10*time.Second, "a reaches c through d", func() bool { return a.mgr.Transit("c") == "d" })
		c.partition("d", "c")
		eventually(t, 10*time.Second, "no path to c", func() bool { return !a.mgr.Reachable("c") })
		for i := range 30 {
			a.mgr.Publish("c", &Publish{Msg: []byte(fmt.Sprintf("a>c/%d/q%d", i, i%3)), QoS: byte(i % 3), Direct: true})
		}
		c.heal("b", "c")
		eventually(t, 10*time.Second, "a reaches c through b", func() bool { return a.mgr.Transit("c") == "b" })
		checkStream(t, c, "a", "c", 30)
	})
}

// TestTransitFrameNeverPassedTwice: a transit frame that reaches a node
// from anything but its origin is dropped and counted, never passed on.
func TestTransitFrameNeverPassedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		c := startCluster(t, nw, Options{}, "a", "b", "c")
		b := c.nodes["b"]
		f, at := beginTransit(nil, transitHeader{From: "a", To: "c", Type: frameAck})
		body := endFrame(appendAckBody(f, ackFrame{Inc: 1, Gen: 1, Seq: 1}), at)[frameHeaderLen:]
		var rd batchReader
		// From c's link (a frame a sent to c through some node, now coming
		// back from c): not its first hop.
		if err := b.mgr.receiveTransit(b.mgr.Link("c"), body, &rd); err != nil {
			t.Fatal(err)
		}
		if got := counter(b, "transitDropped", "c", TransitLoop); got != 1 {
			t.Fatalf("loop drops %v, want 1", got)
		}
		if got := counter(b, "transit", "c"); got != 0 {
			t.Fatalf("passed on %v frames", got)
		}
		// From a's link (its first hop): passed on to c.
		if err := b.mgr.receiveTransit(b.mgr.Link("a"), body, &rd); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "passed on once", func() bool { return counter(b, "transit", "c") == 1 })
	})
}

// TestTransitLossResentInOrder: the transit node's link to c is slower
// than a's stream to c. With a transit window larger than the transit
// node's queue, the queue overflows and drops frames, so c sees later
// messages before the dropped ones: it skips them (go-back-N) and a sends
// everything unacknowledged again after its resend timeout. With a window
// within the queue (and QoS 1/2 messages only: QoS 0 ones are not
// windowed), nothing is dropped. Either way every QoS 1/2 message arrives
// once and in order.
func TestTransitLossResentInOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
	}{{"window over the queue", 1 << 20}, {"window within the queue", 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				within := tc.window < 1500
				dropped, early, resent := transitLoss(t, tc.window, !within)
				t.Logf("b dropped %v transit frames; c skipped %v early messages; a sent %v again", dropped, early, resent)
				switch {
				case !within && (dropped == 0 || early == 0):
					t.Fatal("the transit node dropped nothing, or c never saw a gap: the test no longer exercises loss in transit")
				case within && dropped != 0:
					t.Fatalf("%v frames dropped with a window within the transit queue", dropped)
				}
			})
		})
	}
}

// transitLoss streams bursts from a to c through b, whose link to c is
// slow, with b's transit queue at 1,500 bytes and a's transit window as
// given (QoS 0, 1 and 2 in turn, or with qos0 false QoS 1 in place of 0),
// and checks what c received.
func transitLoss(t *testing.T, window int, qos0 bool) (dropped, early, resent float64) {
	// Small stream buffers and a slow b-c link: b's connection to c drains
	// more slowly than frames for c arrive from a.
	nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond, StreamBuffer: 4096})
	defer nw.Close()
	c := startCluster(t, nw, Options{TransitBytes: 1500, TransitWindow: window, BatchBytes: 300}, "a", "b", "c")
	c.setRTT("b", "c", 200*time.Millisecond)
	a, b, cc := c.nodes["a"], c.nodes["b"], c.nodes["c"]
	c.partition("a", "c")
	eventually(t, 10*time.Second, "a reaches c through b", func() bool { return a.mgr.Transit("c") == "b" })
	const bursts, per = 20, 60
	pad := strings.Repeat("x", 200) // 60 such messages per 100 ms are more than b's link to c carries
	for k := range bursts {
		for i := range per {
			n := k*per + i
			q := byte(n % 3)
			if q == 0 && !qos0 {
				q = 1
			}
			a.mgr.Publish("c", &Publish{Msg: []byte(fmt.Sprintf("a>c/%d/q%d/%s", n, q, pad)), QoS: q, Direct: true})
		}
		time.Sleep(100 * time.Millisecond) // lint:sleep-ok fake time: between bursts
	}
	if missing := checkStream(t, c, "a", "c", bursts*per); !qos0 && missing > 0 {
		t.Errorf("%d messages published at QoS 1 in place of QoS 0 lost", missing)
	}
	return counter(b, "transitDropped", "c", TransitQueueFull), counter(cc, "early", "a"), counter(a, "resent", "c")
}
