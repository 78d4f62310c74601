package placement

import (
	"fmt"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
)

// Summarize computes a topic's monitoring summary from its clients: the
// producer and consumer centroids, W(t), E(t) on home (home may be nil for a
// topic without a home, then Worst is 0), the heaviest producer's node, the
// counts and the rates. This is what a home reports per topic; its size is
// independent of the number of clients.
func Summarize(c Clients, home *coordinate.Coordinate) (Summary, error) {
	var s Summary
	var devP, devC time.Duration
	var err error
	s.ProducerCentroid, devP, err = centroidAndDeviation(c.Producers)
	if err != nil {
		return Summary{}, fmt.Errorf("placement: producers: %w", err)
	}
	s.ConsumerCentroid, devC, err = centroidAndDeviation(c.Consumers)
	if err != nil {
		return Summary{}, fmt.Errorf("placement: consumers: %w", err)
	}
	s.Deviation = (devP + devC) / 2
	if home != nil {
		if err := coords.Check(home, 0); err != nil {
			return Summary{}, fmt.Errorf("placement: home: %w", err)
		}
		s.Worst = worstPairs(c, home)
	}
	s.Producers, s.Consumers = len(c.Producers), len(c.Consumers)
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

func centroidAndDeviation(cs []Client) (*coordinate.Coordinate, time.Duration, error) {
	if len(cs) == 0 {
		return nil, 0, nil
	}
	list := make([]*coordinate.Coordinate, len(cs))
	for i := range cs {
		list[i] = cs[i].Coord
	}
	centroid, err := coords.Centroid(list)
	if err != nil {
		return nil, 0, err
	}
	dev, err := coords.MaxDeviation(list, centroid)
	if err != nil {
		return nil, 0, err
	}
	return centroid, dev, nil
}

// worstPairs is the all-pairs estimate on node b: the largest producer ->
// b latency plus the largest b -> consumer latency, which is the worst over
// every producer-consumer pair since the two halves are independent.
func worstPairs(c Clients, b *coordinate.Coordinate) time.Duration {
	var p, q time.Duration
	for i := range c.Producers {
		p = max(p, coords.OneWay(c.Producers[i].Coord, b))
	}
	for i := range c.Consumers {
		q = max(q, coords.OneWay(b, c.Consumers[i].Coord))
	}
	return p + q
}
