package placement

import (
	"fmt"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
)

// Summarize computes a topic's monitoring summary from its clients: for each
// side the centroid, deviation, shared access node and largest access
// latency; E(t) on home (nil for a topic without a home: Worst is then 0);
// the heaviest producer's node; and the rates. This is what a home reports
// per topic; its size is independent of the number of clients.
func Summarize(c Clients, home *Node) (Summary, error) {
	var s Summary
	var err error
	if s.Producers, err = summarizeSide(c.Producers); err != nil {
		return Summary{}, fmt.Errorf("placement: producers: %w", err)
	}
	if s.Consumers, err = summarizeSide(c.Consumers); err != nil {
		return Summary{}, fmt.Errorf("placement: consumers: %w", err)
	}
	if home != nil {
		if err := coords.Check(home.Coord, 0); err != nil {
			return Summary{}, fmt.Errorf("placement: home: %w", err)
		}
		s.Worst = worstPairs(c, home)
	}
	heaviest := -1.0
	for _, p := range c.Producers {
		s.Rates.In += p.Rate
		if p.Rate > heaviest || p.Rate == heaviest && p.Node < s.Publisher {
			heaviest, s.Publisher = p.Rate, p.Node
		}
	}
	for _, q := range c.Consumers {
		s.Rates.Out += q.Rate
	}
	return s, nil
}

func summarizeSide(cs []Client) (Side, error) {
	if len(cs) == 0 {
		return Side{}, nil
	}
	side := Side{Node: cs[0].Node}
	list := make([]*coordinate.Coordinate, len(cs))
	weights := make([]int, len(cs))
	folded := false
	for i := range cs {
		list[i] = cs[i].Coord
		weights[i] = max(cs[i].Count, 1)
		folded = folded || weights[i] > 1
		side.Count += weights[i]
		side.Access = max(side.Access, cs[i].Access)
		if cs[i].Node != side.Node {
			side.Node = ""
		}
	}
	var err error
	if folded {
		side.Centroid, err = weightedCentroid(list, weights)
	} else {
		side.Centroid, err = coords.Centroid(list)
	}
	if err != nil {
		return Side{}, err
	}
	dev, err := coords.MaxDeviation(list, side.Centroid)
	if err != nil {
		return Side{}, err
	}
	side.Deviation = dev / 2
	if side.Center, err = coords.EnclosingCenter(list, centerIterations); err != nil {
		return Side{}, err
	}
	radius, err := coords.MaxDeviation(list, side.Center)
	if err != nil {
		return Side{}, err
	}
	side.Radius = radius / 2
	return side, nil
}

// weightedCentroid is coords.Centroid with each coordinate counted
// weights[i] times: the centroid of the clients that folded entries stand
// for.
func weightedCentroid(cs []*coordinate.Coordinate, weights []int) (*coordinate.Coordinate, error) {
	if err := coords.Check(cs[0], 0); err != nil {
		return nil, err
	}
	dims := len(cs[0].Vec)
	out := &coordinate.Coordinate{Vec: make([]float64, dims)}
	total := 0.0
	for i, c := range cs {
		if err := coords.Check(c, dims); err != nil {
			return nil, err
		}
		w := float64(weights[i])
		for j, v := range c.Vec {
			out.Vec[j] += w * v
		}
		out.Height += w * c.Height
		out.Adjustment += w * c.Adjustment
		out.Error = max(out.Error, c.Error)
		total += w
	}
	for j := range out.Vec {
		out.Vec[j] /= total
	}
	out.Height /= total
	out.Adjustment /= total
	return out, nil
}

// centerIterations bounds the work of coords.EnclosingCenter; its radius is
// measured afterwards, so fewer iterations only loosen the bound.
const centerIterations = 48

// aggregate selects which point and spread of a Side an estimate uses.
type aggregate uint8

const (
	byCentroid      aggregate = iota // centroid and deviation, local rule
	byCentroidPlain                  // centroid and deviation, as published
	byCenter                         // enclosing centre and radius, local rule
)

// estimate is the side's share of W(t,n): its worst member's one-way latency
// to n, estimated as the centroid's (or centre's) latency plus the deviation
// (or radius), or the largest access latency when every member is on n
// (except by the published formula).
func (s *Side) estimate(n *Node, by aggregate) time.Duration {
	switch {
	case s.Centroid == nil:
		return 0
	case s.Node == n.ID && by != byCentroidPlain:
		return s.Access
	case by == byCenter && s.Center != nil:
		return coords.OneWay(s.Center, n.Coord) + s.Radius
	default:
		return coords.OneWay(s.Centroid, n.Coord) + s.Deviation
	}
}

// clientLatency is the one-way latency between a client and node n: its
// access latency when n is its access node, else estimated from
// coordinates (the client's coordinate carries its access RTT).
func clientLatency(c *Client, n *Node) time.Duration {
	if c.Node == n.ID {
		return c.Access
	}
	return coords.OneWay(c.Coord, n.Coord)
}

// worstPairs is the all-pairs estimate on node n: the largest producer -> n
// latency plus the largest n -> consumer latency, which is the worst over
// every producer-consumer pair since the two halves are independent.
func worstPairs(c Clients, n *Node) time.Duration {
	var p, q time.Duration
	for i := range c.Producers {
		p = max(p, clientLatency(&c.Producers[i], n))
	}
	for i := range c.Consumers {
		q = max(q, clientLatency(&c.Consumers[i], n))
	}
	return p + q
}
