package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/placement/manager"
)

var _ adminapi.Placement = (*Node)(nil)

// leaderPlacement returns the metadata leader's last placement round: this
// node's own when it leads, else asked of the leader on the peer link.
func (n *Node) leaderPlacement(ctx context.Context) (string, manager.Status, error) {
	cp := n.cluster
	if cp == nil || cp.placement == nil {
		return "", manager.Status{}, fmt.Errorf("node: placement not started")
	}
	leader, _ := cp.meta.Leader()
	switch {
	case leader == "":
		return "", manager.Status{}, ErrNoLeader
	case leader == n.cfg.NodeID:
		return leader, cp.placement.manager.Status(), nil
	case cp.layer == nil:
		return leader, manager.Status{}, fmt.Errorf("%w: no peer links", ErrNoLeader)
	}
	body, err := cp.layer.Peers().Call(ctx, leader, methodPlacementStatus, nil)
	if err != nil {
		return leader, manager.Status{}, fmt.Errorf("asking the metadata leader %s: %w", leader, err)
	}
	if len(body) > maxPlacementStatusBytes {
		return leader, manager.Status{}, fmt.Errorf("the metadata leader %s answered %d bytes", leader, len(body))
	}
	var st manager.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return leader, manager.Status{}, fmt.Errorf("the metadata leader %s answered: %w", leader, err)
	}
	return leader, st, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Placement implements adminapi.Placement: every group of this node's copy
// of the metadata, with the leader's last round.
func (n *Node) Placement(ctx context.Context) adminapi.PlacementInfo {
	info := adminapi.PlacementInfo{Groups: []adminapi.PlacementGroup{}, Nodes: []adminapi.PlacementNode{}}
	cp := n.cluster
	if cp == nil || cp.meta == nil {
		info.LeaderErr = "not started"
		return info
	}
	leader, st, err := n.leaderPlacement(ctx)
	info.Leader = leader
	if err != nil {
		info.LeaderErr = err.Error()
	}
	info.Round, info.At = st.Round, st.At
	info.Overloaded, info.Unrelieved, info.Stuck, info.Unmonitored = st.Overloaded, st.Unrelieved, st.Stuck, st.Unmonitored
	info.Rounds, info.Violations, info.Decisions, info.DecisionsFailed, info.ReportsRefused = st.Rounds, st.Violations, st.Proposed, st.Failed, st.Refused
	for _, nd := range st.Nodes {
		info.Nodes = append(info.Nodes, adminapi.PlacementNode{ID: nd.ID, CPU: nd.Load.CPU, Memory: nd.Load.Memory,
			Network: nd.Load.Network, MsgIn: nd.Load.MsgIn, MsgOut: nd.Load.MsgOut})
	}
	seen := map[string]manager.GroupStatus{}
	for _, g := range st.Groups {
		seen[g.ID] = g
	}
	state := cp.meta.State()
	lth := map[string]int{}
	for _, r := range state.Policies().Rules {
		lth[r.Match] = r.LatencyMS
	}
	for _, g := range state.Groups() {
		pg := adminapi.PlacementGroup{Group: g.ID, Rule: g.Rule, Home: g.Home, Voters: g.Voters, Epoch: g.Epoch, LthMs: float64(lth[g.Rule])}
		if gs, ok := seen[g.ID]; ok {
			pg.Monitored, pg.Topics = true, gs.Topics
			pg.EtMs, pg.LthMs, pg.Violated = ms(gs.Worst), ms(gs.Threshold), gs.Violated
			pg.Producers, pg.Consumers, pg.RateIn, pg.RateOut = gs.Producers, gs.Consumers, gs.Rates.In, gs.Rates.Out
		}
		if g.HomeReason != fsm.ReasonCreated && g.HomeReason != "" {
			pg.LastMove = &adminapi.PlacementMove{Reason: string(g.HomeReason), At: g.HomeSince}
		}
		if d := g.Desired; d != nil {
			pg.Pending = &adminapi.PlacementDecision{Home: d.Home, Voters: d.Voters, Reason: string(d.Reason), At: d.At}
		}
		info.Groups = append(info.Groups, pg)
	}
	return info
}

// registerPlacementMetrics exports live placement's counters: this node's
// reports and monitoring drops, and, on the metadata leader, its manager's
// rounds, decisions and violations (0 elsewhere).
func (n *Node) registerPlacementMetrics(pp *placementParts) {
	reg := n.metrics.Registry
	mgr := pp.manager
	status := func(f func(manager.Status) float64) func() float64 {
		return func() float64 { return f(mgr.Status()) }
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sextant_placement_rounds_total",
			Help: "Placement rounds planned by this node's manager (timer and event rounds, while it led the metadata group)."},
			status(func(s manager.Status) float64 { return float64(s.Rounds) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sextant_placement_violations_total",
			Help: "Times a placement group's E(t) was found over its rule's latency_ms (Lth) in a round when it was not in the round before."},
			status(func(s manager.Status) float64 { return float64(s.Violations) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sextant_placement_violating_groups",
			Help: "Placement groups whose E(t) exceeded Lth in the last round (on the metadata leader; 0 elsewhere)."},
			status(func(s manager.Status) float64 {
				v := 0
				for _, g := range s.Groups {
					if g.Violated {
						v++
					}
				}
				return float64(v)
			})),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sextant_placement_decisions_total",
			Help: "Placement decisions (desired home and voters) recorded in the metadata group by this node's manager."},
			status(func(s manager.Status) float64 { return float64(s.Proposed) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sextant_placement_decisions_failed_total",
			Help: "Placement decisions the metadata group refused or did not answer (planned again at the next round)."},
			status(func(s manager.Status) float64 { return float64(s.Failed) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sextant_placement_reports_refused_total",
			Help: "Monitoring reports this node's manager refused (corrupt, from another node than named, old)."},
			status(func(s manager.Status) float64 { return float64(s.Refused) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sextant_placement_reports_sent_total",
			Help: "Monitoring reports this node sent to the metadata leader."},
			func() float64 { s, _ := pp.agent.Stats(); return float64(s) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sextant_placement_reports_failed_total",
			Help: "Monitoring reports this node could not send (no leader known, link down); the next replaces them."},
			func() float64 { _, f := pp.agent.Stats(); return float64(f) }),
	} {
		reg.MustRegister(c)
	}
	dropped := prometheus.NewDesc("sextant_monitor_dropped_total", "Monitoring activity dropped at this node's bounds, by reason (topics, clients).", []string{"reason"}, nil)
	reg.MustRegister(collectorFunc{desc: dropped, collect: func(ch chan<- prometheus.Metric) {
		for reason, v := range pp.tracker.Dropped() {
			ch <- prometheus.MustNewConstMetric(dropped, prometheus.CounterValue, float64(v), reason)
		}
	}})
}
