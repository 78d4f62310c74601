package replication

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestFailoverAfterLeaderKill kills the leader of a three-replica group 20
// times, each time at a seeded random point of the heartbeat cycle, and
// measures on the bubble's fake clock how long the others take to elect a
// new leader and to commit through it (memnet RTT 1 ms; 150 ms for WAN). The killed node
// comes back and catches up before the next kill. With the LAN timeouts
// the median must stay under 500 ms (issue 14; Canal reports 667 ms) and
// every failover within two heartbeat and two election timeouts, plus two
// election timeouts for each election that chose nobody (two candidates
// splitting the vote; its term is seen in the new leader's). With
// -failover-table the other timings run too, for the trade-off table in
// docs/design/replication.md.
var failoverTable = flag.Bool("failover-table", false, "also measure failover with the other heartbeat timeouts")

func TestFailoverAfterLeaderKill(t *testing.T) {
	seed := testSeed(t)
	for _, tc := range []struct {
		name   string
		t      Timeouts
		rtt    time.Duration
		assert bool
	}{
		{"lan", LAN(), time.Millisecond, true},
		{"heartbeat=100ms", Timeouts{Heartbeat: 100 * time.Millisecond, Election: 100 * time.Millisecond, LeaderLease: 50 * time.Millisecond, Commit: 50 * time.Millisecond}, time.Millisecond, false},
		{"heartbeat=250ms", Timeouts{Heartbeat: 250 * time.Millisecond, Election: 250 * time.Millisecond, LeaderLease: 125 * time.Millisecond, Commit: 100 * time.Millisecond}, time.Millisecond, false},
		{"heartbeat=500ms", Timeouts{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, LeaderLease: 250 * time.Millisecond, Commit: 100 * time.Millisecond}, time.Millisecond, false},
		{"heartbeat=1s", Timeouts{Heartbeat: time.Second, Election: time.Second, LeaderLease: 500 * time.Millisecond, Commit: 100 * time.Millisecond}, time.Millisecond, false},
		{"wan-rtt=150ms", WAN(), 150 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.assert && !*failoverTable {
				t.Skip("trade-off measurement; run with -failover-table")
			}
			synctest.Test(t, func(t *testing.T) {
				elected, committed, extra := measureFailover(t, tc.t, tc.rtt, seed, 20)
				t.Logf("%s: new leader after kill: median %v, p90 %v, max %v; first commit: median %v, p90 %v",
					tc.name, pct(elected, 50), pct(elected, 90), pct(elected, 100), pct(committed, 50), pct(committed, 90))
				if !tc.assert {
					return
				}
				if m := pct(elected, 50); m >= 500*time.Millisecond {
					t.Errorf("median failover %v, want under 500ms", m)
				}
				for i, e := range elected {
					bound := 2*tc.t.Heartbeat + 2*tc.t.Election*time.Duration(1+extra[i])
					if e > bound {
						t.Errorf("failover %d took %v with %d failed elections, beyond 2 x heartbeat + 2 x election per election (%v)", i, e, extra[i], bound)
					}
				}
			})
		})
	}
}

// measureFailover also returns, per kill, the elections that chose nobody
// before the one that did (terms skipped between the killed leader's and
// the new leader's).
func measureFailover(t *testing.T, tt Timeouts, rtt time.Duration, seed uint64, kills int) (elected, committed []time.Duration, extra []int) {
	r := rng(seed)
	c := newCluster(t, rtt)
	c.tune = func(cfg *Config) { cfg.Timeouts = tt }
	c.start(ids(3)...)
	for i := range kills {
		leadID, lead := c.leader()
		if _, err := lead.Propose(ctxFor(t, 5*time.Second), []byte(fmt.Sprintf("before-kill-%d", i))); err != nil {
			t.Fatal(err)
		}
		c.converge()
		// Kill at a random point of the heartbeat cycle.
		time.Sleep(time.Duration(r.Int64N(int64(tt.Heartbeat)))) // lint:sleep-ok fake time in a bubble: seeded jitter
		start := time.Now()
		term := lead.Stats().Term
		c.kill(leadID)
		var next *Group[uint64]
		waitFor(t, 20*tt.Election, "a new leader", func() bool {
			for _, g := range c.groups {
				if g.IsLeader() {
					next = g
					return true
				}
			}
			return false
		})
		elected = append(elected, time.Since(start))
		extra = append(extra, int(next.Stats().Term-term)-1)
		if _, err := next.Propose(ctxFor(t, 10*time.Second), []byte(fmt.Sprintf("after-kill-%d", i))); err != nil {
			t.Fatalf("kill %d: commit through the new leader: %v", i, err)
		}
		committed = append(committed, time.Since(start))
		c.restart(leadID)
	}
	log := c.converge()
	if len(log) != 2*kills {
		t.Errorf("%d commands after %d kills, want %d", len(log), kills, 2*kills)
	}
	return elected, committed, extra
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)]
}
