package emu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
)

// VivaldiConfig drives the simulated gossip that embeds a latency matrix into
// coordinates.
type VivaldiConfig struct {
	// Rounds is the number of gossip rounds: in each, every node probes one
	// peer chosen at random and updates its coordinate with the measured RTT
	// and the peer's current coordinate (serf's Client.Update).
	Rounds int
	// Jitter makes every probe measure RTT * (1 + Jitter*N(0,1)), with the
	// normal deviate clipped to ±3: the dataset's RTTs are already averages
	// that include typical queueing, so the noise is centred on them.
	Jitter float64
	// Seed seeds peer choice, jitter and the starting coordinates.
	Seed uint64
}

// Embed runs Vivaldi (serf's coordinate package with its default
// configuration: 8 dimensions plus height) over m and returns one coordinate
// per node. Every node starts at a small seeded random offset from the
// origin rather than at the origin itself, so serf never falls back to its
// unseeded random direction for coincident coordinates; the result depends
// only on m and cfg.
func Embed(m *Matrix, cfg VivaldiConfig) ([]*coordinate.Coordinate, error) {
	n := m.Len()
	if n < 2 {
		return nil, fmt.Errorf("emu: vivaldi needs at least 2 nodes, have %d", n)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed_0f_71_7a1d1))
	conf := coordinate.DefaultConfig()
	clients := make([]*coordinate.Client, n)
	for i := range clients {
		c, err := coordinate.NewClient(conf)
		if err != nil {
			return nil, fmt.Errorf("emu: vivaldi client: %w", err)
		}
		start := coordinate.NewCoordinate(conf)
		for k := range start.Vec {
			start.Vec[k] = (rng.Float64() - 0.5) * 1e-3 // ±0.5 ms
		}
		if err := c.SetCoordinate(start); err != nil {
			return nil, fmt.Errorf("emu: vivaldi start: %w", err)
		}
		clients[i] = c
	}
	for round := 0; round < cfg.Rounds; round++ {
		for i, c := range clients {
			j := rng.IntN(n - 1)
			if j >= i {
				j++
			}
			rtt := m.RTT[i][j] * (1 + cfg.Jitter*min(max(rng.NormFloat64(), -3), 3))
			d := max(time.Duration(rtt*float64(time.Millisecond)), time.Microsecond)
			if _, err := c.Update(m.Names[j], clients[j].GetCoordinate(), d); err != nil {
				return nil, fmt.Errorf("emu: vivaldi update %s -> %s: %w", m.Names[i], m.Names[j], err)
			}
		}
	}
	out := make([]*coordinate.Coordinate, n)
	for i, c := range clients {
		out[i] = c.GetCoordinate()
	}
	return out, nil
}

// ErrorStats summarises how well coordinates estimate a matrix: the median
// and 90th percentile over all pairs of |estimated RTT - true RTT| / true RTT,
// and the median absolute error in milliseconds.
type ErrorStats struct {
	MedianRel, P90Rel float64
	MedianAbsMS       float64
}

// Accuracy compares cs with the true RTTs of m.
func Accuracy(m *Matrix, cs []*coordinate.Coordinate) ErrorStats {
	var rel, abs []float64
	for i := 0; i < m.Len(); i++ {
		for j := i + 1; j < m.Len(); j++ {
			truth := m.RTT[i][j]
			if truth <= 0 {
				continue
			}
			est := float64(coords.RTT(cs[i], cs[j])) / float64(time.Millisecond)
			rel = append(rel, math.Abs(est-truth)/truth)
			abs = append(abs, math.Abs(est-truth))
		}
	}
	return ErrorStats{MedianRel: quantile(rel, 0.5), P90Rel: quantile(rel, 0.9), MedianAbsMS: quantile(abs, 0.5)}
}

// quantile is the q-quantile of xs (nearest rank); xs is sorted in place.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
