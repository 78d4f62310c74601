package membership

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/memnet"
)

// cityMatrix reads testdata/city_rtt_ms.csv (WonderNetwork's ping
// statistics; see testdata/ATTRIBUTION) into a symmetric RTT matrix.
func cityMatrix(t *testing.T) ([]string, [][]time.Duration) {
	t.Helper()
	f, err := os.Open("testdata/city_rtt_ms.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	var cities []string
	id := func(c string) int {
		if i, ok := index[c]; ok {
			return i
		}
		index[c] = len(cities)
		cities = append(cities, c)
		return index[c]
	}
	type edge struct {
		a, b int
		rtt  time.Duration
	}
	var edges []edge
	for _, r := range rows[1:] {
		ms, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		edges = append(edges, edge{id(r[0]), id(r[1]), time.Duration(ms * float64(time.Millisecond))})
	}
	m := make([][]time.Duration, len(cities))
	for i := range m {
		m[i] = make([]time.Duration, len(cities))
	}
	for _, e := range edges {
		m[e.a][e.b], m[e.b][e.a] = e.rtt, e.rtt
	}
	for i := range m {
		for j := range m {
			if i != j && m[i][j] == 0 {
				t.Fatalf("no RTT between %s and %s", cities[i], cities[j])
			}
		}
	}
	return cities, m
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// TestCoordinatesMatchCityRTTs is the done-when check: five members
// on memnet with the RTTs between five real cities converge to coordinates
// whose median relative error against the matrix is under 10%.
func TestCoordinatesMatchCityRTTs(t *testing.T) {
	cities, rtt := cityMatrix(t)
	synctest.Test(t, func(t *testing.T) {
		settle(t)
		nw := memnet.New(memnet.Options{})
		defer nw.Close()
		hosts := make([]string, len(cities))
		ids := make([]string, len(cities))
		for i := range cities {
			hosts[i] = fmt.Sprintf("10.0.1.%d", i+1)
			ids[i] = strings.ReplaceAll(cities[i], " ", "-")
		}
		if err := nw.SetMatrix(hosts, rtt); err != nil {
			t.Fatal(err)
		}
		ms := make([]*Membership, len(cities))
		for i := range cities {
			var join []string
			if i > 0 {
				join = []string{hosts[0] + ":7946"}
			}
			ms[i] = node(t, nw, ids[i], hosts[i], Labels{Site: cities[i], Tier: TierEdge}, WAN, join...)
		}

		// errors returns each pair's relative error, from each node's own
		// coordinate, and from node 0's cached view of everyone.
		errors := func() (own, cached []float64) {
			for i := range ms {
				for j := i + 1; j < len(ms); j++ {
					want := rtt[i][j].Seconds()
					got := ms[i].Coordinate().DistanceTo(ms[j].Coordinate()).Seconds()
					own = append(own, math.Abs(got-want)/want)
					if est, ok := ms[0].EstimateRTT(ids[i], ids[j]); ok {
						cached = append(cached, math.Abs(est.Seconds()-want)/want)
					}
				}
			}
			return own, cached
		}
		start := time.Now()
		var own, cached []float64
		for _, at := range []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute} {
			time.Sleep(start.Add(at).Sub(time.Now())) // lint:sleep-ok lets gossip probes run in fake time
			own, cached = errors()
			t.Logf("after %v of gossip (WAN profile, a probe per node every 5s): median relative error %.1f%% (own coordinates), %.1f%% (%s's cache, %d of 10 pairs)",
				at, 100*median(own), 100*median(cached), cities[0], len(cached))
		}
		if got := median(own); got >= 0.10 {
			t.Errorf("median relative error %.1f%%, want < 10%%", 100*got)
		}
		if len(cached) != len(own) {
			t.Errorf("%s knows coordinates for %d of %d pairs", cities[0], len(cached), len(own))
		} else if got := median(cached); got >= 0.10 {
			t.Errorf("median relative error from cached coordinates %.1f%%, want < 10%%", 100*got)
		}
		for i := range ms {
			for j := i + 1; j < len(ms); j++ {
				est := ms[i].Coordinate().DistanceTo(ms[j].Coordinate())
				t.Logf("%-9s - %-9s measured %6.1f ms, estimated %6.1f ms", cities[i], cities[j],
					float64(rtt[i][j])/1e6, float64(est)/1e6)
			}
		}
	})
}
