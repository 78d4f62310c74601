package emu

import (
	"fmt"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
	"github.com/sextantmq/sextant/internal/placement"
)

// world is one emulated topology: the nodes that can be homes (with the
// coordinates Vivaldi gave them) and the true one-way latency between them.
// Clients always attach to one of these nodes.
type world struct {
	nodes    []placement.Node
	index    map[placement.NodeID]int
	oneWay   [][]time.Duration // true one-way latency between nodes
	accuracy ErrorStats        // of the coordinates against the truth
}

// newWorld is the world of matrix m with coordinates cs.
func newWorld(m *Matrix, cs []*coordinate.Coordinate) *world {
	w := &world{index: map[placement.NodeID]int{}, oneWay: make([][]time.Duration, m.Len()), accuracy: Accuracy(m, cs)}
	for i, name := range m.Names {
		id := placement.NodeID(name)
		w.index[id] = i
		w.nodes = append(w.nodes, placement.Node{ID: id, Coord: cs[i]})
		w.oneWay[i] = make([]time.Duration, m.Len())
		for j := range m.Names {
			w.oneWay[i][j] = time.Duration(m.RTT[i][j] / 2 * float64(time.Millisecond))
		}
	}
	return w
}

// latency is the true one-way latency between two nodes.
func (w *world) latency(a, b placement.NodeID) time.Duration {
	return w.oneWay[w.index[a]][w.index[b]]
}

// client is a client on node i with one-way access latency access.
func (w *world) client(i int, access time.Duration, rate float64) placement.Client {
	n := w.nodes[i]
	return placement.Client{Node: n.ID, Access: access, Coord: coords.Client(n.Coord, 2*access), Rate: rate}
}

// newTopic builds an unplaced topic with its summary.
func newTopic(name string, lth time.Duration, c placement.Clients) (placement.Topic, error) {
	s, err := placement.Summarize(c, nil)
	if err != nil {
		return placement.Topic{}, fmt.Errorf("emu: topic %s: %w", name, err)
	}
	return placement.Topic{Name: name, Threshold: lth, Summary: s, Clients: &c}, nil
}

// score is what one policy achieved on one permutation.
type score struct {
	worst      time.Duration // worst producer -> home -> consumer latency of any pair
	topicWorst time.Duration // sum over topics of each topic's worst pair
	topics     int64         // topics with at least one pair
	sum        time.Duration // over all pairs
	violations int64         // pairs over their topic's threshold
	pairs      int64
}

// policyNames are the policies every scenario compares, in table order.
var policyNames = []string{"centroid", "centroid-plain", "center", "allpairs", "oracle", "publisher", "hash"}

func (w *world) policy(name string) placement.Policy {
	if name == "oracle" {
		return placement.Oracle{Latency: w.latency}
	}
	p, err := placement.PolicyByName(name)
	if err != nil {
		panic(err) // policyNames are code: a bad one is a bug the tests catch
	}
	return p
}

// evaluate places topics (all without a home, nodes unloaded) with each
// policy through the planner, and scores every producer-consumer pair
// against the true latencies.
func (w *world) evaluate(topics []placement.Topic) ([]score, error) {
	out := make([]score, len(policyNames))
	for p, name := range policyNames {
		cfg := placement.DefaultConfig()
		cfg.Policy = w.policy(name)
		res, _, err := placement.Plan(placement.Snapshot{Nodes: w.nodes, Topics: topics}, cfg, placement.State{})
		if err != nil {
			return nil, fmt.Errorf("emu: %s: %w", name, err)
		}
		if len(res.Moves) != len(topics) {
			return nil, fmt.Errorf("emu: %s placed %d of %d topics", name, len(res.Moves), len(topics))
		}
		home := make(map[string]placement.NodeID, len(res.Moves))
		for _, mv := range res.Moves {
			home[mv.Topic] = mv.To
		}
		s := &out[p]
		for i := range topics {
			t := &topics[i]
			b := w.oneWay[w.index[home[t.Name]]]
			down := make([]time.Duration, len(t.Clients.Consumers))
			for k, co := range t.Clients.Consumers {
				down[k] = b[w.index[co.Node]] + co.Access
			}
			var tw time.Duration
			for _, pr := range t.Clients.Producers {
				up := pr.Access + b[w.index[pr.Node]] // latencies are symmetric
				for _, d := range down {
					lat := up + d
					tw = max(tw, lat)
					s.worst = max(s.worst, lat)
					s.sum += lat
					s.pairs++
					if lat > t.Threshold {
						s.violations++
					}
				}
			}
			if len(down) > 0 && len(t.Clients.Producers) > 0 {
				s.topicWorst += tw
				s.topics++
			}
		}
	}
	return out, nil
}
