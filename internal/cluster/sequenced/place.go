package sequenced

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// errNotReady: a group cannot be placed yet, but may be soon.
var errNotReady = errors.New("sequenced: not enough nodes registered yet")

// create records group id for its first publish here: its home is this
// access node (locality) if it is under its group budget, else the alive
// node with the fewest groups, nearest first; its voters follow the rule's
// replicas and spread (fsm.ChooseVoters) among the alive registered nodes
// under their budget. If another node created it first, its record wins.
// Until this node's own registration is in its metadata copy it creates
// nothing (errNotReady): a node registers just after it starts, and a group
// created meanwhile would be homed elsewhere for good.
func (r *Router) create(ctx context.Context, id string, rule fsm.Rule) (fsm.Group, error) {
	st := r.cfg.Meta.State()
	if _, ok := st.Node(r.id); !ok {
		return fsm.Group{}, fmt.Errorf("%w: this node (%s) is not registered yet", errNotReady, r.id)
	}
	load := st.GroupLoad()
	var alive []fsm.Node
	ids := []string{r.id}
	if r.cfg.Cluster != nil {
		ids = r.cfg.Cluster.Alive()
		if !slices.Contains(ids, r.id) {
			// This node is alive, whether or not its membership view has
			// taken in its own arrival yet (just after it starts).
			ids = append(ids, r.id)
		}
	}
	for _, nid := range ids {
		n, ok := st.Node(nid)
		if !ok {
			continue // not registered yet
		}
		if r.cfg.MaxGroups > 0 && load[nid].Replicas >= r.cfg.MaxGroups {
			continue
		}
		alive = append(alive, n)
	}
	if len(alive) < max(rule.Replicas, 1) && len(ids) >= max(rule.Replicas, 1) {
		// Enough nodes are up, but not all in this node's copy of the
		// registry yet (they register as they start): try again later.
		return fsm.Group{}, fmt.Errorf("%w: %d of %d alive nodes registered and under their group budget", errNotReady, len(alive), len(ids))
	}
	if len(alive) == 0 {
		return fsm.Group{}, fmt.Errorf("%w: no registered node under its group budget", fsm.ErrTooFewNodes)
	}
	home := r.id
	if !slices.ContainsFunc(alive, func(n fsm.Node) bool { return n.ID == r.id }) {
		home = slices.MinFunc(alive, func(a, b fsm.Node) int {
			return cmp.Or(cmp.Compare(load[a.ID].Replicas, load[b.ID].Replicas),
				cmp.Compare(r.distance(r.id, a.ID), r.distance(r.id, b.ID)), cmp.Compare(a.ID, b.ID))
		}).ID
	}
	voters, err := fsm.ChooseVoters(home, alive, rule.Replicas, rule.Spread, r.distance)
	if err != nil {
		return fsm.Group{}, err
	}
	ret := r.cfg.Retention
	if rule.Retention != nil {
		ret = *rule.Retention
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	rec, created, err := r.cfg.Meta.CreateGroup(ctx, fsm.Group{
		ID: id, Rule: rule.Match, Home: home, Voters: voters, Retention: ret, Created: r.clock.Now(),
	})
	if err != nil {
		return fsm.Group{}, err
	}
	if created {
		r.metrics.created.Inc()
		r.log.Info("created a placement group", "group", id, "rule", rule.Match, "home", home, "voters", voters)
	}
	return rec, nil
}

// distance is the coordinates' estimate of the round trip between two
// nodes, in milliseconds (+Inf when unknown; 0 to itself).
func (r *Router) distance(a, b string) float64 {
	if a == b {
		return 0
	}
	if r.cfg.Cluster == nil {
		return math.Inf(1)
	}
	d, ok := r.cfg.Cluster.EstimateRTT(a, b)
	if !ok {
		return math.Inf(1)
	}
	return float64(d.Microseconds()) / 1000
}
