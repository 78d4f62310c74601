package clustertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// waitInterest waits until every running node other than n knows n's
// interest in filter.
func waitInterest(c *Cluster, n *Node, filter string) {
	c.T.Helper()
	c.Eventually(n.ID+" interest in "+filter+" known everywhere", func() bool {
		for _, o := range c.running() {
			if o != n && !o.HasInterest(n.ID, filter) {
				return false
			}
		}
		return true
	})
}

// TestPubSubEveryPairAndQoS publishes from every node at QoS 0, 1 and 2 to
// subscribers on every node, across a latency matrix, and checks that each
// subscriber gets every message once, at the right QoS, and in the order
// each publisher sent them.
func TestPubSubEveryPairAndQoS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rtt := [][]time.Duration{
			{0, 20 * time.Millisecond, 80 * time.Millisecond},
			{20 * time.Millisecond, 0, 60 * time.Millisecond},
			{80 * time.Millisecond, 60 * time.Millisecond, 0},
		}
		c := Start(t, 3, rtt)
		subs := make([]*Client, 3)
		for i, n := range c.Nodes() {
			subs[i] = n.Connect(fmt.Sprintf("sub-%d", i), ConnectOptions{})
			subs[i].Subscribe(2, "t/#")
		}
		for _, n := range c.Nodes() {
			waitInterest(c, n, "t/#")
		}
		const perQoS = 40
		var want []string // per publisher, in order
		for i, n := range c.Nodes() {
			pub := n.Connect(fmt.Sprintf("pub-%d", i), ConnectOptions{})
			for q := byte(0); q <= 2; q++ {
				for s := range perQoS {
					payload := fmt.Sprintf("%d/%d/%03d", i, q, s)
					pub.Publish(fmt.Sprintf("t/%d/%d", i, q), q, false, payload)
					want = append(want, payload)
				}
			}
		}
		for j, sub := range subs {
			got := sub.Collect(len(want))
			perPub := map[string][]string{}
			for _, m := range got {
				parts := strings.Split(m.Payload, "/")
				if q := parts[1]; fmt.Sprint(m.QoS) != q {
					t.Errorf("sub %d: %s delivered at QoS %d", j, m.Payload, m.QoS)
				}
				perPub[parts[0]] = append(perPub[parts[0]], m.Payload)
			}
			for i := range 3 {
				var exp []string
				for _, w := range want {
					if strings.HasPrefix(w, fmt.Sprintf("%d/", i)) {
						exp = append(exp, w)
					}
				}
				if !slices.Equal(perPub[fmt.Sprint(i)], exp) {
					t.Errorf("sub on node %d: publisher %d's messages arrived as %v, want %v in order",
						j, i, perPub[fmt.Sprint(i)], exp)
				}
			}
			time.Sleep(time.Second) // lint:sleep-ok fake time: lets any duplicate arrive
			if extra := sub.Pending(); len(extra) != 0 {
				t.Errorf("sub %d: %d extra messages: %v", j, len(extra), extra)
			}
		}
	})
}
