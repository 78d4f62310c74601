package placement

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Policy ranks the nodes that could be a topic's home. It is the seam that
// lets the planner compare selection rules on the same input.
type Policy interface {
	Rank(t *Topic, nodes []Node) Ranking
}

// Ranking is a policy's answer for one topic.
type Ranking struct {
	// Candidates lists every node, best first.
	Candidates []Candidate
	// Feasible is how many leading Candidates meet the topic's threshold, by
	// the policy's estimate. The planner only considers those, or all of
	// them when Feasible is 0 (ePulsar: "all brokers if none").
	Feasible int
	// Scored says whether Estimate orders the candidates. Latency-agnostic
	// policies (hash, publisher) rank by a rule instead; the planner then
	// never moves a topic for a latency gain.
	Scored bool
}

// Candidate is one node with the policy's estimate of the topic's worst-case
// one-way publisher -> node -> subscriber latency there.
type Candidate struct {
	Node     NodeID
	Estimate time.Duration
}

// Compile-time guards.
var (
	_ Policy = Centroid{}
	_ Policy = Center{}
	_ Policy = AllPairs{}
	_ Policy = Hash{}
	_ Policy = Publisher{}
	_ Policy = Oracle{}
)

// Centroid is ePulsar's policy: it ranks nodes by
// W(t,b) = d(NC_P(t), b) + d(NC_C(t), b) + W(t), from the topic's summary
// only, and keeps those at or under Lth(t). A side whose clients all share
// one access node counts only their access latency on that node (see
// Side.Node); Plain turns that off and uses the formula as published.
type Centroid struct {
	Plain bool
}

// Rank implements Policy.
func (c Centroid) Rank(t *Topic, nodes []Node) Ranking {
	by := byCentroid
	if c.Plain {
		by = byCentroidPlain
	}
	return rankBySides(t, nodes, by)
}

// Center is Centroid with each side's smallest-enclosing-ball centre and
// radius (Side.Center, Side.Radius) in place of its centroid and deviation:
// W(t,b) = d(C_P(t), b) + d(C_C(t), b) + R_P(t) + R_C(t). The summary has the
// same size; the bound is tighter when a side's members are unevenly spread
// (several producers in a few far cities).
type Center struct{}

// Rank implements Policy.
func (Center) Rank(t *Topic, nodes []Node) Ranking {
	return rankBySides(t, nodes, byCenter)
}

func rankBySides(t *Topic, nodes []Node, by aggregate) Ranking {
	return rankByEstimate(t, nodes, func(n *Node) time.Duration {
		return t.Summary.Producers.estimate(n, by) + t.Summary.Consumers.estimate(n, by)
	})
}

// AllPairs ranks nodes by the worst case over every producer-consumer pair,
// from each client's own coordinate (or its access latency on its own access
// node). It needs Topic.Clients and falls back to Centroid's estimate
// without them.
type AllPairs struct{}

// Rank implements Policy.
func (AllPairs) Rank(t *Topic, nodes []Node) Ranking {
	if t.Clients == nil {
		return Centroid{}.Rank(t, nodes)
	}
	return rankByEstimate(t, nodes, func(n *Node) time.Duration { return worstPairs(*t.Clients, n) })
}

// rankByEstimate orders nodes feasible-first, each group by increasing
// estimate and then by node ID.
func rankByEstimate(t *Topic, nodes []Node, estimate func(*Node) time.Duration) Ranking {
	r := Ranking{Candidates: make([]Candidate, len(nodes)), Scored: true}
	for i := range nodes {
		r.Candidates[i] = Candidate{Node: nodes[i].ID, Estimate: estimate(&nodes[i])}
	}
	feasible := func(c Candidate) bool { return t.Threshold == 0 || c.Estimate <= t.Threshold }
	slices.SortFunc(r.Candidates, func(a, b Candidate) int {
		fa, fb := feasible(a), feasible(b)
		if fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Estimate, b.Estimate), cmp.Compare(a.Node, b.Node))
	})
	for _, c := range r.Candidates {
		if feasible(c) {
			r.Feasible++
		}
	}
	return r
}

// PolicyNames are the policies a configuration can name (PolicyByName), the
// default first. Oracle is not among them: it needs true latencies.
var PolicyNames = []string{"center", "centroid", "centroid-plain", "allpairs", "hash", "publisher"}

// ErrPolicy is returned for a policy name that PolicyByName does not know.
var ErrPolicy = errors.New("placement: unknown policy")

// PolicyByName returns the policy called name (one of PolicyNames).
func PolicyByName(name string) (Policy, error) {
	switch name {
	case "center":
		return Center{}, nil
	case "centroid":
		return Centroid{}, nil
	case "centroid-plain":
		return Centroid{Plain: true}, nil
	case "allpairs":
		return AllPairs{}, nil
	case "hash":
		return Hash{}, nil
	case "publisher":
		return Publisher{}, nil
	}
	return nil, fmt.Errorf("%w %q; want one of %v", ErrPolicy, name, PolicyNames)
}
