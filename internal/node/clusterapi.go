package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/coords"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

var _ adminapi.ClusterView = (*Node)(nil)

// Nodes implements adminapi.ClusterView: members with labels, state, Vivaldi
// coordinate and estimated RTT to every other member.
func (n *Node) Nodes() []adminapi.NodeInfo {
	cp := n.cluster
	if cp == nil || cp.membership == nil {
		return []adminapi.NodeInfo{{
			ID: n.cfg.NodeID, Site: n.cfg.Site, Zone: n.cfg.Zone, Tier: n.cfg.Tier,
			MQTTAddr: n.Addr("mqtt"), AdminAddr: n.Addr("admin"), State: string(membership.StateAlive),
		}}
	}
	ms := cp.membership.Members()
	measured := map[string]time.Duration{}
	if cp.layer != nil {
		measured = cp.layer.MeasuredRTT()
	}
	out := make([]adminapi.NodeInfo, 0, len(ms))
	for _, m := range ms {
		ni := adminapi.NodeInfo{
			ID: m.ID, Site: m.Labels.Site, Zone: m.Labels.Zone, Tier: m.Labels.Tier,
			MQTTAddr: m.Labels.MQTTAddr, AdminAddr: m.Labels.AdminAddr, PeerAddr: m.Labels.PeerAddr,
			State: string(m.State), Coordinate: coordJSON(m.Coordinate),
		}
		for _, o := range ms {
			if o.ID == m.ID {
				continue
			}
			if d, ok := cp.membership.EstimateRTT(m.ID, o.ID); ok {
				if ni.RTTms == nil {
					ni.RTTms = map[string]float64{}
				}
				ni.RTTms[o.ID] = float64(d) / float64(time.Millisecond)
			}
		}
		if m.ID == n.cfg.NodeID {
			for id, d := range measured {
				if ni.MeasuredMs == nil {
					ni.MeasuredMs = map[string]float64{}
				}
				ni.MeasuredMs[id] = float64(d) / float64(time.Millisecond)
			}
		}
		out = append(out, ni)
	}
	return out
}

func coordJSON(c *coordinate.Coordinate) *adminapi.Coordinate {
	if c == nil {
		return nil
	}
	return &adminapi.Coordinate{Vec: append([]float64(nil), c.Vec...), Error: c.Error, Adjustment: c.Adjustment, Height: c.Height}
}

// Cluster implements adminapi.ClusterView: the metadata group's view.
func (n *Node) Cluster(ctx context.Context) adminapi.ClusterInfo {
	cp := n.cluster
	ci := adminapi.ClusterInfo{NodeID: n.cfg.NodeID, GeneratedAt: n.clock.Now()}
	if cp == nil || cp.meta == nil {
		return ci
	}
	ci.Leader, ci.LeaderAddr = cp.meta.Leader()
	ci.IsLeader = cp.meta.IsLeader()
	st := cp.meta.State()
	ci.Applied = st.Applied()
	ci.Policies = st.Policies().Version
	ci.Registered = st.Nodes()
	if servers, err := cp.meta.Servers(ctx); err != nil {
		ci.ServersErr = err.Error()
	} else {
		for _, s := range servers {
			ci.Servers = append(ci.Servers, adminapi.ServerInfo{ID: s.ID, Addr: s.Addr, Voter: s.Voter})
		}
	}
	if cp.membership != nil {
		ci.Members = len(cp.membership.Members())
	} else {
		ci.Members = 1
	}
	return ci
}

// Policies implements adminapi.ClusterView from the local metadata copy.
func (n *Node) Policies() adminapi.PolicySet {
	if n.cluster == nil || n.cluster.meta == nil {
		return adminapi.PolicySet{Rules: []fsm.Rule{}}
	}
	p := n.cluster.meta.State().Policies()
	rules := p.Rules
	if rules == nil {
		rules = []fsm.Rule{}
	}
	return adminapi.PolicySet{Version: p.Version, Rules: rules}
}

// WaitPolicies implements adminapi.ClusterView: it waits for each change
// applied to the local copy until the policies reach version.
func (n *Node) WaitPolicies(ctx context.Context, version uint64) error {
	if n.cluster == nil || n.cluster.meta == nil {
		return fmt.Errorf("node: no metadata group yet: %w", context.DeadlineExceeded)
	}
	m := n.cluster.meta
	for {
		st := m.State()
		if st.Policies().Version >= version {
			return nil
		}
		if err := m.Wait(ctx, st.Applied()+1); err != nil {
			return err
		}
	}
}

// PutPolicies implements adminapi.ClusterView: validate, then replace the rules
// through the metadata group (compare-and-swap when expect is set).
func (n *Node) PutPolicies(ctx context.Context, rules []fsm.Rule, expect *uint64) (adminapi.PolicySet, error) {
	cmd := fsm.PutPolicies(rules)
	if expect != nil {
		cmd = fsm.PutPoliciesIf(rules, *expect)
	}
	if err := cmd.Validate(); err != nil {
		return adminapi.PolicySet{}, err
	}
	res, err := n.cluster.meta.Propose(ctx, cmd)
	if err != nil {
		return adminapi.PolicySet{}, err
	}
	if err := n.cluster.meta.Wait(ctx, res.Index); err != nil {
		return adminapi.PolicySet{}, err
	}
	return n.Policies(), nil
}

// ClientList adapts the broker's client list to the admin API.
type clientList struct{ n *Node }

func (c clientList) Clients() []adminapi.ClientInfo {
	var access *coordinate.Coordinate
	if cp := c.n.cluster; cp != nil && cp.membership != nil {
		access = cp.membership.Coordinate()
	}
	var out []adminapi.ClientInfo
	for _, ci := range c.n.broker.Clients() {
		info := adminapi.ClientInfo{
			ID: ci.ID, Remote: ci.Remote, Protocol: ci.Version.String(),
			RTTms: float64(ci.RTT) / float64(time.Millisecond), RTTSource: ci.RTTSource,
			Subscriptions: ci.Subscriptions, Persistent: ci.Persistent,
		}
		if access != nil {
			info.Coordinate = coordJSON(coords.Client(access, ci.RTT))
		}
		out = append(out, info)
	}
	return out
}
