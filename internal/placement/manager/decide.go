package manager

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/placement"
)

// reasonOf maps the planner's reasons to a decision's.
func reasonOf(r placement.Reason) fsm.Reason {
	switch r {
	case placement.ReasonLatency:
		return fsm.ReasonViolation
	case placement.ReasonOverload:
		return fsm.ReasonOverload
	}
	return fsm.ReasonRebalance // a group whose home left the cluster
}

// decide records the round's moves as decisions, at most MaxDecisions, and
// takes the ones it could not record out of the planner's cool-down so
// that they are planned again.
func (m *Manager) decide(ctx context.Context, state fsm.State, v *view, res placement.Result, now time.Time, plan *placement.State) []Decision {
	worst := map[string]time.Duration{}
	for _, g := range v.groups {
		worst[g.ID] = g.Worst
	}
	var out []Decision
	for _, mv := range res.Moves {
		g, ok := state.Group(mv.Topic)
		if !ok || len(out) >= m.cfg.MaxDecisions || !m.meta.IsLeader() || ctx.Err() != nil {
			delete(plan.LastMove, mv.Topic)
			continue
		}
		if d := g.Desired; d != nil && d.Reason == fsm.ReasonManual {
			continue // the operator's decision stands (and the group keeps cooling)
		}
		voters := desiredVoters(state, g, string(mv.To), v.dist)
		if d := g.Desired; d != nil && d.Home == string(mv.To) && sameMembers(d.Voters, voters) {
			continue // already decided
		}
		c := fsm.DesiredChange{Group: g.ID, Epoch: g.Epoch, Home: string(mv.To), Voters: voters, Reason: reasonOf(mv.Reason), At: now}
		pctx, cancel := context.WithTimeout(ctx, m.cfg.Interval)
		r, err := m.meta.Propose(pctx, fsm.SetGroupDesired(c))
		cancel()
		if err != nil {
			delete(plan.LastMove, mv.Topic)
			m.mu.Lock()
			m.mu.failed++
			m.mu.Unlock()
			m.log.Warn("placement: decision not recorded", "group", g.ID, "to", mv.To, "reason", c.Reason, "err", err)
			continue
		}
		d := Decision{Group: g.ID, From: string(mv.From), To: string(mv.To), Voters: voters, Reason: c.Reason,
			Estimate: mv.Estimate, Worst: worst[g.ID], Index: r.Index}
		out = append(out, d)
		m.mu.Lock()
		m.mu.proposed++
		m.mu.Unlock()
		m.log.Info("placement decision", "group", d.Group, "from", d.From, "to", d.To, "voters", d.Voters,
			"reason", d.Reason, "worst", d.Worst, "estimate", d.Estimate, "index", d.Index)
	}
	return out
}

// dist is the estimated RTT between two candidate nodes, in seconds; NaN
// when either has no coordinate.
func (v *view) dist(a, b string) float64 {
	ca, cb := v.coord[placement.NodeID(a)], v.coord[placement.NodeID(b)]
	if ca == nil || cb == nil || len(ca.Vec) != len(cb.Vec) {
		return math.NaN()
	}
	return coords.RTT(ca, cb).Seconds()
}

func sameMembers(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// desiredVoters is the voter set of g with its home moved to `to`: the same
// set when `to` is a voter (a leadership move), `to` alone for a group of
// one replica, else the group's replica count chosen among its current
// voters and `to` by the rule's spread (fsm.ChooseVoters), `to` first: the
// executor adds `to` and removes the voter the spread ranks last.
func desiredVoters(state fsm.State, g fsm.Group, to string, dist fsm.Distance) []string {
	if slices.Contains(g.Voters, to) {
		out := []string{to}
		for _, id := range g.Voters {
			if id != to {
				out = append(out, id)
			}
		}
		return out
	}
	if len(g.Voters) <= 1 {
		return []string{to}
	}
	var rule fsm.Rule
	for _, r := range state.Policies().Rules {
		if r.Match == g.Rule {
			rule = r
			break
		}
	}
	replicas := rule.Replicas
	if replicas != 1 && replicas != 3 && replicas != 5 {
		replicas = len(g.Voters) | 1 // a record in transition (2 or 4 voters): the odd count around it
	}
	var nodes []fsm.Node
	for _, id := range append([]string{to}, g.Voters...) {
		if n, ok := state.Node(id); ok {
			nodes = append(nodes, n)
		}
	}
	voters, err := fsm.ChooseVoters(to, nodes, replicas, rule.Spread, dist)
	if err != nil {
		// Spread unknown or too few registered nodes: keep the nearest
		// current voters.
		rest := slices.DeleteFunc(slices.Clone(g.Voters), func(id string) bool { _, ok := state.Node(id); return !ok })
		slices.SortStableFunc(rest, func(a, b string) int {
			da, db := dist(to, a), dist(to, b)
			switch {
			case da < db || !math.IsNaN(da) && math.IsNaN(db):
				return -1
			case da > db || math.IsNaN(da) && !math.IsNaN(db):
				return 1
			}
			return 0
		})
		voters = append([]string{to}, rest[:min(len(rest), len(g.Voters)-1)]...)
	}
	return voters
}

// Move records an operator's decision: the group of topic (a topic, or a
// group id) should be homed on node to. It is recorded whichever node this
// is (the proposal goes to the leader), with reason manual, which the
// manager's own decisions do not replace; moving a group to where it is
// cancels a pending decision. It returns the group's record after the
// decision. Errors: ErrUnknown for a topic without a group or a node that
// is not registered; fsm.ErrConflict if the group's home moved meanwhile.
func (m *Manager) Move(ctx context.Context, topic, to string) (fsm.Group, error) {
	state := m.meta.State()
	g, ok := state.Group(topic)
	if !ok {
		id, _, sequenced := state.GroupFor(topic)
		if g, ok = state.Group(id); !sequenced || !ok {
			return fsm.Group{}, fmt.Errorf("%w: %q is no placement group nor a topic of one", ErrUnknown, topic)
		}
	}
	if _, ok := state.Node(to); !ok {
		return fsm.Group{}, fmt.Errorf("%w: node %q is not registered", ErrUnknown, to)
	}
	voters := desiredVoters(state, g, to, m.reportedDist())
	r, err := m.meta.Propose(ctx, fsm.SetGroupDesired(fsm.DesiredChange{
		Group: g.ID, Epoch: g.Epoch, Home: to, Voters: voters, Reason: fsm.ReasonManual, At: m.cfg.Clock.Now(),
	}))
	if r.Group != nil && (err == nil || errors.Is(err, fsm.ErrConflict)) {
		return *r.Group, err
	}
	return fsm.Group{}, err
}

// reportedDist estimates RTTs from the coordinates of the reports held.
func (m *Manager) reportedDist() fsm.Distance {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := view{coord: map[placement.NodeID]*coordinate.Coordinate{}}
	for id, rc := range m.mu.reports {
		if rc.r.Coord != nil {
			v.coord[placement.NodeID(id)] = rc.r.Coord
		}
	}
	return v.dist
}
