package manager

import (
	"cmp"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/placement"
)

// topicGroups caches topic -> group id under one policy version: rules
// change rarely, topics repeat every report.
type topicGroups struct {
	version uint64
	group   map[string]string // "" for a topic that has no group
}

// reset forgets the cache when the rules changed.
func (c *topicGroups) reset(state fsm.State) {
	if v := state.Policies().Version; c.group == nil || v != c.version {
		c.version, c.group = v, map[string]string{}
	}
}

// lookup returns topic's group id ("" for none) under the rules of the
// last reset.
func (c *topicGroups) lookup(state fsm.State, topic string) string {
	id, ok := c.group[topic]
	if !ok {
		id, _, _ = state.GroupFor(topic)
		if len(c.group) < 1<<20 { // bounded: forget all beyond it
			c.group[topic] = id
		} else {
			c.group = map[string]string{}
		}
	}
	return id
}

// view is what snapshot saw, for the decisions and the status.
type view struct {
	coord       map[placement.NodeID]*coordinate.Coordinate // candidates'
	groups      []GroupStatus
	nodes       []NodeStatus
	unmonitored int
	// urgent: something for an event round to act on (a violation, an
	// overloaded node, a group without a home).
	urgent bool
}

// entry folds one side of a group's clients at one access node.
type entry struct {
	count  int
	maxRTT time.Duration
	rate   float64
}

type groupClients struct {
	producers, consumers map[placement.NodeID]*entry
	topics               map[string]struct{} // reported, at most maxStatusTopics
}

// maxStatusTopics bounds the topics a group's status names.
const maxStatusTopics = 16

// snapshot builds the planner's input from the fresh reports and the
// metadata.
//
// A node groups were decided away from (shedding: when that was last
// seen) counts as loaded up to the threshold, not over it, until a report
// covers only time after that: its measured load still includes what the
// planner takes as gone, so it is neither shed from again on that load nor
// chosen as a home.
func (m *Manager) snapshot(state fsm.State, now time.Time, cache *topicGroups, shedding map[string]time.Time) (placement.Snapshot, view) {
	m.mu.Lock()
	fresh := make([]*received, 0, len(m.mu.reports))
	for id, rc := range m.mu.reports {
		age := now.Sub(rc.at)
		_, registered := state.Node(id)
		if !registered && age > 10*m.cfg.StaleAfter {
			delete(m.mu.reports, id) // a node that left: forget it eventually
			continue
		}
		if registered && age <= m.cfg.StaleAfter {
			fresh = append(fresh, rc)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(fresh, func(a, b *received) int { return cmp.Compare(a.r.Node, b.r.Node) })

	v := view{coord: map[placement.NodeID]*coordinate.Coordinate{}}
	var snap placement.Snapshot
	dims := 0
	for _, rc := range fresh {
		c := rc.r.Coord
		if c == nil || dims != 0 && len(c.Vec) != dims {
			continue // no coordinate (or another dimensionality): cannot be placed on
		}
		dims = len(c.Vec)
		id := placement.NodeID(rc.r.Node)
		l := rc.r.Load
		if t, ok := shedding[rc.r.Node]; ok {
			if rc.at.Add(-rc.r.Window).After(t) {
				delete(shedding, rc.r.Node) // a report of after the decisions: its load is real
			} else {
				l = m.capped(l)
			}
		}
		snap.Nodes = append(snap.Nodes, placement.Node{
			ID: id, Coord: c, Load: placement.Load{CPU: l.CPU, Memory: l.Memory, Network: l.Network},
			Rate: l.MsgIn + l.MsgOut, OutRate: l.MsgOut,
		})
		v.coord[id] = c
		v.nodes = append(v.nodes, NodeStatus{ID: rc.r.Node, Load: l})
		v.urgent = v.urgent || m.overloaded(l)
	}

	// Each group's clients, folded per access node and side.
	cache.reset(state)
	clients := map[string]*groupClients{}
	for _, rc := range fresh {
		id := placement.NodeID(rc.r.Node)
		if v.coord[id] == nil {
			continue
		}
		for i := range rc.r.Topics {
			t := &rc.r.Topics[i]
			gid := cache.lookup(state, t.Topic)
			if gid == "" {
				continue
			}
			gc := clients[gid]
			if gc == nil {
				gc = &groupClients{producers: map[placement.NodeID]*entry{}, consumers: map[placement.NodeID]*entry{}, topics: map[string]struct{}{}}
				clients[gid] = gc
			}
			if len(gc.topics) < maxStatusTopics {
				gc.topics[t.Topic] = struct{}{}
			}
			merge(gc.producers, id, t.Producers)
			merge(gc.consumers, id, t.Consumers)
		}
	}

	rules := map[string]fsm.Rule{}
	for _, r := range state.Policies().Rules { // one copy of the rules per round
		rules[r.Match] = r
	}
	for _, g := range state.Groups() {
		home := placement.NodeID(g.Home)
		if g.Desired != nil && v.coord[placement.NodeID(g.Desired.Home)] != nil {
			home = placement.NodeID(g.Desired.Home)
		}
		var homeNode *placement.Node
		switch _, registered := state.Node(string(home)); {
		case !registered:
			home = "" // its home left the cluster: place it anew
		case v.coord[home] == nil:
			v.unmonitored++
			continue
		default:
			homeNode = &placement.Node{ID: home, Coord: v.coord[home]}
		}
		var lth time.Duration
		if r, ok := rules[g.Rule]; ok {
			lth = time.Duration(r.LatencyMS) * time.Millisecond
		}
		cs := m.folded(clients[g.ID], v.coord)
		sum, err := placement.Summarize(cs, homeNode)
		if err != nil {
			m.log.Warn("placement: group left out", "group", g.ID, "err", err)
			continue
		}
		snap.Topics = append(snap.Topics, placement.Topic{Name: g.ID, Home: home, Threshold: lth, Summary: sum, Clients: &cs})
		violated := lth > 0 && sum.Worst > lth
		v.urgent = v.urgent || violated || home == ""
		var topics []string
		if gc := clients[g.ID]; gc != nil {
			for t := range gc.topics {
				topics = append(topics, t)
			}
			slices.Sort(topics)
		}
		v.groups = append(v.groups, GroupStatus{
			ID: g.ID, Home: string(home), Worst: sum.Worst, Threshold: lth, Violated: violated, Rates: sum.Rates,
			Producers: sum.Producers.Count, Consumers: sum.Consumers.Count, Topics: topics,
		})
	}
	return snap, v
}

// capped is l with every quantity over its limit lowered to the limit.
func (m *Manager) capped(l monitor.Load) monitor.Load {
	limit := m.cfg.Planner.Overload
	if limit <= 0 {
		limit = 0.85
	}
	l.CPU, l.Memory, l.Network = min(l.CPU, limit), min(l.Memory, limit), min(l.Network, limit)
	if r := m.cfg.Planner.MaxOutRate; r > 0 {
		l.MsgOut = min(l.MsgOut, r)
	}
	return l
}

func merge(side map[placement.NodeID]*entry, node placement.NodeID, s monitor.Side) {
	if s.Count == 0 {
		return
	}
	e := side[node]
	if e == nil {
		e = &entry{}
		side[node] = e
	}
	e.count += s.Count
	e.maxRTT = max(e.maxRTT, s.MaxRTT)
	e.rate += s.Rate
}

// folded turns a group's entries into placement clients, one per access
// node and side, sorted by node: the node's coordinate with the largest
// access round trip in the height (coords.Client), its one-way half as the
// access latency.
func (m *Manager) folded(gc *groupClients, coord map[placement.NodeID]*coordinate.Coordinate) placement.Clients {
	var cs placement.Clients
	if gc == nil {
		return cs
	}
	for _, side := range []struct {
		from map[placement.NodeID]*entry
		to   *[]placement.Client
	}{{gc.producers, &cs.Producers}, {gc.consumers, &cs.Consumers}} {
		for node, e := range side.from {
			*side.to = append(*side.to, placement.Client{
				Node: node, Access: e.maxRTT / 2, Coord: coords.Client(coord[node], e.maxRTT), Rate: e.rate, Count: e.count,
			})
		}
		slices.SortFunc(*side.to, func(a, b placement.Client) int { return cmp.Compare(a.Node, b.Node) })
	}
	return cs
}
