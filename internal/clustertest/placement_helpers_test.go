package clustertest

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/monitor/agent"
	"github.com/sextantmq/sextant/internal/placement/manager"
	"github.com/sextantmq/sextant/internal/procstat"
)

// plCityRTTs returns the round-trip times between cities from the repo's
// copy of WonderNetwork's ping statistics (internal/emu/data, see its
// ATTRIBUTION.md): the mean of both directions where both were measured.
func plCityRTTs(t *testing.T, cities []string) [][]time.Duration {
	t.Helper()
	f, err := os.Open("../emu/data/us_city_rtt_ms.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	type pair struct{ a, b string }
	sum, n := map[pair]float64{}, map[pair]int{}
	for _, r := range rows[1:] {
		ms, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		a, b := r[0], r[1]
		if a > b {
			a, b = b, a
		}
		sum[pair{a, b}] += ms
		n[pair{a, b}]++
	}
	out := make([][]time.Duration, len(cities))
	for i := range cities {
		out[i] = make([]time.Duration, len(cities))
		for j := range cities {
			if i == j {
				continue
			}
			a, b := cities[i], cities[j]
			if a > b {
				a, b = b, a
			}
			k := pair{a, b}
			if n[k] == 0 {
				t.Fatalf("no RTT between %s and %s", cities[i], cities[j])
			}
			out[i][j] = time.Duration(sum[k] / float64(n[k]) * float64(time.Millisecond))
		}
	}
	return out
}

// plOptions sets short placement intervals and fake process loads: load
// (nil: idle nodes) is a node's CPU utilisation, read at each report: its
// process is given 2 processors and uses load × 2 seconds of CPU per
// second of the bubble's fake time, whatever the test process really
// uses (which, in fake time, would read as any figure at all).
func plOptions(interval time.Duration, confirm int, cooldown time.Duration, load func(node string) float64) func(*Options) {
	return func(o *Options) {
		prev := o.Config
		o.Config = func(c *config.Config) {
			c.PlacementInterval, c.PlacementConfirm, c.PlacementCooldown = interval, confirm, cooldown
			if prev != nil {
				prev(c)
			}
		}
		o.Placement = func(node string, a *agent.Config) {
			a.Capacity.CPUs, a.Capacity.Memory = 2, 1<<40
			var cpu time.Duration
			last := time.Now()
			a.Process = func() (procstat.Sample, error) {
				now := time.Now()
				if load != nil {
					cpu += time.Duration(load(node) * 2 * float64(now.Sub(last)))
				}
				last = now
				return procstat.Sample{CPU: cpu, RSSKiB: 100 << 10}, nil
			}
		}
	}
}

// plCoordinatesSettle waits (up to 10 minutes of fake time: a WAN probe
// every 5 s per node) until node 0's estimate of every pair's RTT is
// within 25% or 5 ms of the true one, whichever is larger.
func (c *Cluster) plCoordinatesSettle(rtt [][]time.Duration) {
	c.T.Helper()
	start := time.Now()
	for {
		worst := 0.0
		for i := range rtt {
			for j := i + 1; j < len(rtt); j++ {
				est, ok := c.Node(0).Node.EstimateRTT(c.Node(i).ID, c.Node(j).ID)
				e := 1.0
				if ok {
					tol := max(0.25*rtt[i][j].Seconds(), 0.005)
					e = 0.25 * math.Abs(est.Seconds()-rtt[i][j].Seconds()) / tol
				}
				worst = max(worst, e)
			}
		}
		if worst <= 0.25 {
			c.T.Logf("coordinates within tolerance (%.0f%% of it) after %v", 400*worst, time.Since(start))
			return
		}
		if time.Since(start) > 10*time.Minute {
			c.T.Fatalf("coordinates still off by %.0f%% of the tolerance after %v", 400*worst, time.Since(start))
		}
		tm := time.NewTimer(time.Second)
		<-tm.C
	}
}

// plManager returns the placement manager of the node leading the
// metadata group.
func (c *Cluster) plManager() *manager.Manager {
	c.T.Helper()
	var m *manager.Manager
	c.Eventually("a metadata leader", func() bool {
		for _, n := range c.running() {
			if n.Node.Meta().IsLeader() {
				m = n.Node.PlacementManager()
				return true
			}
		}
		return false
	})
	return m
}

// plGroup returns the group's status in the leader's last round.
func plGroup(s manager.Status, id string) (manager.GroupStatus, bool) {
	for _, g := range s.Groups {
		if g.ID == id {
			return g, true
		}
	}
	return manager.GroupStatus{}, false
}

// plGroupOf returns the record of topic's group on node n.
func plGroupOf(n *Node, topic string) (fsm.Group, bool) {
	st := n.Node.Meta().State()
	id, _, ok := st.GroupFor(topic)
	if !ok {
		return fsm.Group{}, false
	}
	return st.Group(id)
}
