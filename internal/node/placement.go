package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/serf/coordinate"
	dto "github.com/prometheus/client_model/go"

	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/monitor/agent"
	"github.com/sextantmq/sextant/internal/placement/manager"
	"github.com/sextantmq/sextant/internal/procstat"
)

// methodPlacementReport carries a node's monitoring report to the metadata
// leader's placement manager, as a one-way notification on the peer link
// (docs/design/placement-live.md). The cluster layer's service methods
// start at 32: 32 the publish path's, 33 to 35 the feeds', 40 the
// migration executor's handovers, 44 and 45 live placement's, 48 the
// groups' figures. The layer refuses a method registered twice.
const methodPlacementReport byte = 44

// methodPlacementStatus asks a node for its placement manager's last
// round (manager.Status, as JSON): /v1/placement on a node that does not
// lead asks the leader.
const methodPlacementStatus byte = 45

// maxPlacementStatusBytes bounds a status answer read from the leader.
const maxPlacementStatusBytes = 64 << 20

// ErrNoLeader is returned when a report cannot be sent because no metadata
// leader is known, or its link is down.
var ErrNoLeader = errors.New("node: no reachable metadata leader")

// placementParts are live placement's pieces on this node: the tracker the
// broker tells of sequenced topics' clients, the agent that reports them
// with the node's load every placement-interval, and the placement manager,
// which plans only while this node leads the metadata group.
type placementParts struct {
	tracker *monitor.Tracker
	agent   *agent.Agent
	manager *manager.Manager
}

// startPlacement builds and starts live placement (before the cluster
// layer starts: it registers the report method). Every node runs an agent
// and a manager; the manager plans and records decisions only on the
// metadata leader (it checks at each round and before each proposal), so
// it starts and stops with leadership.
func (n *Node) startPlacement(cp *clusterParts) error {
	cfg := n.cfg
	pcfg, err := manager.PlannerConfig(cfg.PlacementPolicy, cfg.PlacementOverload, cfg.PlacementMaxOut, cfg.PlacementMargin,
		cfg.PlacementMarginPc, cfg.PlacementConfirm, cfg.PlacementCooldown, cfg.PlacementInterval)
	if err != nil {
		return fmt.Errorf("node: placement: %w", err)
	}
	mgr, err := manager.New(manager.Config{
		Interval: cfg.PlacementInterval, Planner: pcfg, Clock: n.clock,
		Logger: n.log.With("subsystem", "placement"),
	}, cp.meta)
	if err != nil {
		return fmt.Errorf("node: placement: %w", err)
	}
	pp := &placementParts{tracker: monitor.NewTracker(monitor.Limits{}), manager: mgr}
	acfg := agent.Config{
		Node: cfg.NodeID, Tracker: pp.tracker, Interval: cfg.PlacementInterval,
		Capacity: monitor.Capacity{CPUs: float64(n.cpus), Network: float64(cfg.PlacementNetwork)},
		Counters: n.placementCounters, Send: n.sendReport(cp, mgr),
		Clock: n.clock, Logger: n.log.With("subsystem", "monitor"),
	}
	if _, err := procstat.Read(0); err != nil {
		// No /proc (not Linux): CPU and memory are not measured, and a
		// node is never overloaded by them; say so once, not per report.
		n.log.Warn("placement: the process's CPU and memory cannot be read; they count as idle", "err", err)
		acfg.Process = func() (procstat.Sample, error) { return procstat.Sample{}, nil }
		acfg.Capacity.Memory = 1 << 62
	} else if _, err := procstat.MemoryLimit(); err != nil {
		n.log.Warn("placement: the memory available cannot be read; memory counts as idle", "err", err)
		acfg.Capacity.Memory = 1 << 62
	}
	pinned, err := pinnedCoordinate(cfg.PlacementCoord)
	switch {
	case err != nil:
		return fmt.Errorf("node: placement: %w", err)
	case pinned != nil && cp.membership != nil:
		// placement-coordinate: the operator's distances instead of the
		// measured ones (one machine, where every RTT is loopback's).
		acfg.Coordinate = pinned.Clone
	case cp.membership != nil:
		acfg.Coordinate = cp.membership.Coordinate
	default:
		acfg.Coordinate = func() *coordinate.Coordinate { return nil }
	}
	if n.opts.Placement != nil {
		n.opts.Placement(&acfg)
	}
	if pp.agent, err = agent.New(acfg); err != nil {
		return fmt.Errorf("node: placement: %w", err)
	}
	if cp.layer != nil {
		err := cp.layer.Handle(methodPlacementReport, func(_ context.Context, from string, body []byte) ([]byte, error) {
			return nil, mgr.Receive(from, body)
		})
		if err == nil {
			err = cp.layer.Handle(methodPlacementStatus, func(context.Context, string, []byte) ([]byte, error) {
				return json.Marshal(mgr.Status())
			})
		}
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	cp.placement = pp
	n.broker.SetObserver(pp.tracker)
	n.group.Go(pp.agent.Run)
	n.group.Go(mgr.Run)
	n.registerPlacementMetrics(pp)
	return nil
}

// sendReport delivers a report to the metadata leader: a local call on
// the leader itself, else a notification on the peer link to it.
func (n *Node) sendReport(cp *clusterParts, mgr *manager.Manager) func(context.Context, []byte) error {
	self := n.cfg.NodeID
	return func(_ context.Context, body []byte) error {
		leader, _ := cp.meta.Leader()
		switch {
		case leader == "":
			return ErrNoLeader
		case leader == self:
			return mgr.Receive(self, body)
		case cp.layer == nil || !cp.layer.Peers().Notify(leader, methodPlacementReport, body):
			return fmt.Errorf("%w: link to %s down", ErrNoLeader, leader)
		}
		return nil
	}
}

// Traffic counters the agent turns into the node's load: client bytes and
// peer bytes; client and peer messages, received and sent.
var (
	netByteFamilies = []string{"sextant_bytes_received_total", "sextant_bytes_sent_total",
		"sextant_peer_received_bytes_total", "sextant_peer_sent_bytes_total"}
	msgInFamilies  = []string{"sextant_messages_received_total", "sextant_peer_received_messages_total"}
	msgOutFamilies = []string{"sextant_messages_sent_total", "sextant_peer_sent_messages_total"}
)

// placementCounters reads the node's cumulative traffic from its metric
// registry (once per report).
func (n *Node) placementCounters() agent.Counters {
	fams, err := n.metrics.Registry.Gather()
	if err != nil && len(fams) == 0 {
		n.log.Debug("placement: counters unavailable", "err", err)
		return agent.Counters{}
	}
	sums := map[string]float64{}
	for _, f := range fams {
		if f.GetType() != dto.MetricType_COUNTER {
			continue
		}
		var s float64
		for _, m := range f.GetMetric() {
			s += m.GetCounter().GetValue()
		}
		sums[f.GetName()] = s
	}
	sum := func(names []string) uint64 {
		var t float64
		for _, name := range names {
			t += sums[name]
		}
		return uint64(t)
	}
	return agent.Counters{NetBytes: sum(netByteFamilies), MsgIn: sum(msgInFamilies), MsgOut: sum(msgOutFamilies)}
}

// PlacementManager exposes the placement manager (nil before Start): its Status
// (what the leader's last round saw and decided) and Move.
func (n *Node) PlacementManager() *manager.Manager {
	if n.cluster == nil || n.cluster.placement == nil {
		return nil
	}
	return n.cluster.placement.manager
}

// PlacementStats are the monitoring side's counters on this node.
type PlacementStats struct {
	ReportsSent, ReportsFailed uint64
	Dropped                    map[string]uint64 // monitor.Tracker.Dropped
}

// PlacementStats returns this node's monitoring counters.
func (n *Node) PlacementStats() PlacementStats {
	if n.cluster == nil || n.cluster.placement == nil {
		return PlacementStats{}
	}
	pp := n.cluster.placement
	sent, failed := pp.agent.Stats()
	return PlacementStats{ReportsSent: sent, ReportsFailed: failed, Dropped: pp.tracker.Dropped()}
}

// EstimateRTT estimates the round trip between nodes a and b from their
// network coordinates (membership's); ok is false when either is unknown
// or the node runs alone.
func (n *Node) EstimateRTT(a, b string) (time.Duration, bool) {
	if n.cluster == nil || n.cluster.membership == nil {
		return 0, false
	}
	return n.cluster.membership.EstimateRTT(a, b)
}

// pinnedCoordinate turns placement-coordinate (milliseconds per axis) into
// a coordinate of the gossip's dimensionality, the missing axes 0, with
// the least height; nil when it is not set.
func pinnedCoordinate(s string) (*coordinate.Coordinate, error) {
	ms, err := config.ParseCoordinate(s)
	if err != nil || ms == nil {
		return nil, err
	}
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	if len(ms) > len(c.Vec) {
		return nil, fmt.Errorf("placement-coordinate: %d axes, at most %d", len(ms), len(c.Vec))
	}
	for i, v := range ms {
		c.Vec[i] = v / 1000
	}
	c.Error = 0
	return c, nil
}
