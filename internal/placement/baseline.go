package placement

import (
	"cmp"
	"hash/fnv"
	"slices"
	"time"
)

// Hash is the latency-agnostic baseline: the hash space of topic names is
// split into equal ranges, one per node in node-ID order, and a topic goes to
// the node owning its name's hash; the remaining nodes follow in ring order.
// Estimates are 0: it knows nothing about latency.
type Hash struct{}

// Rank implements Policy.
func (Hash) Rank(t *Topic, nodes []Node) Ranking {
	ids := sortedIDs(nodes)
	r := Ranking{Candidates: make([]Candidate, len(ids)), Feasible: len(ids)}
	if len(ids) == 0 {
		return r
	}
	h := fnv.New32a()
	h.Write([]byte(t.Name))
	start := int(uint64(h.Sum32()) * uint64(len(ids)) >> 32)
	for i := range ids {
		r.Candidates[i] = Candidate{Node: ids[(start+i)%len(ids)]}
	}
	return r
}

// Publisher puts a topic on the access node of its heaviest producer
// (Summary.Publisher), then the other nodes by Centroid's estimate. It is the
// "publisher-local" baseline.
type Publisher struct{}

// Rank implements Policy.
func (Publisher) Rank(t *Topic, nodes []Node) Ranking {
	r := Centroid{}.Rank(t, nodes)
	r.Scored, r.Feasible = false, len(r.Candidates)
	slices.SortStableFunc(r.Candidates, func(a, b Candidate) int {
		pa, pb := a.Node == t.Summary.Publisher, b.Node == t.Summary.Publisher
		switch {
		case pa == pb:
			return cmp.Compare(a.Estimate, b.Estimate)
		case pa:
			return -1
		default:
			return 1
		}
	})
	return r
}

// Oracle ranks nodes by true latencies, for evaluation only: Latency(a, b) is
// the one-way latency between two nodes, and a client adds its Access
// latency. It needs Topic.Clients and falls back to Centroid's estimate
// without them.
type Oracle struct {
	Latency func(a, b NodeID) time.Duration
}

// Rank implements Policy.
func (o Oracle) Rank(t *Topic, nodes []Node) Ranking {
	if t.Clients == nil || o.Latency == nil {
		return Centroid{}.Rank(t, nodes)
	}
	return rankByEstimate(t, nodes, func(n *Node) time.Duration {
		return TrueWorst(*t.Clients, n.ID, o.Latency)
	})
}

// TrueWorst is the worst publisher -> home -> subscriber latency of clients
// on home, given true node-to-node one-way latencies.
func TrueWorst(c Clients, home NodeID, latency func(a, b NodeID) time.Duration) time.Duration {
	var p, q time.Duration
	for _, x := range c.Producers {
		p = max(p, x.Access+latency(x.Node, home))
	}
	for _, x := range c.Consumers {
		q = max(q, latency(home, x.Node)+x.Access)
	}
	return p + q
}

func sortedIDs(nodes []Node) []NodeID {
	ids := make([]NodeID, len(nodes))
	for i := range nodes {
		ids[i] = nodes[i].ID
	}
	slices.Sort(ids)
	return ids
}
