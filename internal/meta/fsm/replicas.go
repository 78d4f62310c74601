package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrTooFewNodes: fewer alive nodes than a rule's replicas.
var ErrTooFewNodes = errors.New("fsm: too few nodes for the replicas")

// Distance is the estimated latency between two nodes (from their network
// coordinates), in any unit as long as it is the same for every pair.
type Distance func(a, b string) float64

// ChooseVoters picks the voters of a new group: home first, then
// replicas-1 others from alive, one at a time. Each pick takes the
// candidate that ranks first by
//
//  1. its spread class (below), lowest first;
//  2. its distance to the home, nearest first (commits wait for the home's
//     round trip to the nearest majority);
//  3. core before edge (core nodes are the ones meant to hold state);
//  4. node id, so that equal inputs always give equal voters.
//
// Spread classes, recomputed after every pick against the voters chosen so
// far (home included):
//
//	zone: 0 same site as the home, a zone no voter is in
//	      1 same site as the home, a zone a voter is in
//	      2 another site, a (site, zone) no voter is in
//	      3 another site, a (site, zone) a voter is in
//	site: 0 a site no voter is in
//	      1 a site a voter is in, a zone no voter of that site is in
//	      2 a (site, zone) a voter is in
//
// So zone spread stays in the home's site while it has nodes and falls
// back to the nearest other sites, and site spread takes one node per site
// while there are sites, then one per zone. Labels left empty are values
// like any other: nodes without a site share the site "".
//
// alive are the candidates (the home among them); their order does not
// matter, an id given twice is an error. dist may be nil (all distances
// equal); a NaN distance ranks last. replicas must be 1, 3 or 5 (spread is
// ignored for 1). Fewer alive nodes than replicas is ErrTooFewNodes.
func ChooseVoters(home string, alive []Node, replicas int, spread Spread, dist Distance) ([]string, error) {
	switch replicas {
	case 1, 3, 5:
	default:
		return nil, fmt.Errorf("%w: replicas %d, want 1, 3 or 5", ErrInvalid, replicas)
	}
	if replicas > 1 && spread != SpreadZone && spread != SpreadSite {
		return nil, fmt.Errorf("%w: spread %q, want %q or %q", ErrInvalid, spread, SpreadZone, SpreadSite)
	}
	nodes := slices.Clone(alive)
	slices.SortFunc(nodes, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	var h *Node
	for i := range nodes {
		if i > 0 && nodes[i].ID == nodes[i-1].ID {
			return nil, fmt.Errorf("%w: node %q given twice", ErrInvalid, nodes[i].ID)
		}
		if nodes[i].ID == home {
			h = &nodes[i]
		}
	}
	if h == nil {
		return nil, fmt.Errorf("%w: the home %q is not among the alive nodes", ErrInvalid, home)
	}
	if len(nodes) < replicas {
		return nil, fmt.Errorf("%w: %d alive, %d wanted", ErrTooFewNodes, len(nodes), replicas)
	}
	type cand struct {
		n    *Node
		dist float64
	}
	var cands []cand
	for i := range nodes {
		if n := &nodes[i]; n.ID != home {
			d := 0.0
			if dist != nil {
				d = dist(home, n.ID)
			}
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			cands = append(cands, cand{n: n, dist: d})
		}
	}
	chosen := []*Node{h}
	for len(chosen) < replicas {
		best := -1
		var bestClass int
		for i, c := range cands {
			if c.n == nil {
				continue
			}
			class := spreadClass(spread, h, chosen, c.n)
			if best < 0 || class < bestClass || class == bestClass && rankBefore(c.dist, c.n, cands[best].dist, cands[best].n) {
				best, bestClass = i, class
			}
		}
		chosen = append(chosen, cands[best].n)
		cands[best].n = nil
	}
	out := make([]string, len(chosen))
	for i, n := range chosen {
		out[i] = n.ID
	}
	return out, nil
}

// rankBefore orders candidates of one spread class: nearer, then core,
// then by id.
func rankBefore(da float64, a *Node, db float64, b *Node) bool {
	if da != db {
		return da < db
	}
	ta, tb := tierRank(a.Labels.Tier), tierRank(b.Labels.Tier)
	if ta != tb {
		return ta < tb
	}
	return cmp.Less(a.ID, b.ID)
}

func tierRank(t string) int {
	if t == TierCore {
		return 0
	}
	return 1
}

// spreadClass is c's class given the voters chosen so far (see
// ChooseVoters).
func spreadClass(spread Spread, home *Node, chosen []*Node, c *Node) int {
	site, zone := c.Labels.Site, c.Labels.Zone
	siteUsed, zoneUsed := false, false // zoneUsed: (site, zone) taken
	for _, v := range chosen {
		if v.Labels.Site == site {
			siteUsed = true
			if v.Labels.Zone == zone {
				zoneUsed = true
			}
		}
	}
	if spread == SpreadSite {
		switch {
		case !siteUsed:
			return 0
		case !zoneUsed:
			return 1
		}
		return 2
	}
	// Zone spread (and replicas 1, where there is nothing to choose).
	class := 0
	if site != home.Labels.Site {
		class = 2
	}
	if zoneUsed {
		class++
	}
	return class
}
