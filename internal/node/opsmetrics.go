package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/buildinfo"
	"github.com/sextantmq/sextant/internal/membership"
)

// registerOpsMetrics adds the gauges operators alert on and dashboards
// show besides the broker's own: the build, whether the node is draining,
// the metadata group's leadership as this node sees it, and the gossip
// membership. They are read at scrape time from the running parts.
func (n *Node) registerOpsMetrics() {
	reg := n.metrics.Registry
	bi := buildinfo.Read()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sextant_build_info", Help: "The running build (value 1): version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": bi.Short(), "commit": bi.Commit, "go_version": bi.GoVersion},
	})
	info.Set(1)
	reg.MustRegister(info)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sextant_node_draining", Help: "1 while the node drains before stopping (not ready, handing sessions over).",
	}, func() float64 {
		if n.drain.readyErr() != nil {
			return 1
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sextant_node_ready", Help: "1 while /readyz answers ready: serving, not draining, and not cut off from the other nodes of its cluster.",
	}, func() float64 { return b2f(n.Ready() == nil) }))
	cp := n.cluster
	if cp == nil || cp.meta == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sextant_meta_leader", Help: "1 when this node leads the metadata group.",
	}, func() float64 { return b2f(cp.meta.IsLeader()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sextant_meta_leader_known", Help: "1 when this node knows a leader of the metadata group (0 for long: the group lost its quorum, or this node is cut off).",
	}, func() float64 { id, _ := cp.meta.Leader(); return b2f(id != "") }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sextant_meta_last_contact_seconds", Help: "Seconds since this node last heard from the metadata group's leader (0 on the leader; -1 if never since it started).",
	}, func() float64 {
		now := n.clock.Now()
		last := cp.meta.LastContact(now)
		if last.IsZero() {
			return -1
		}
		return now.Sub(last).Seconds()
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sextant_meta_caught_up", Help: "1 once this node's metadata copy caught up with the group's leader since it started; until then it opens no placement group, holds sequenced publishes and answers moves only through the leader (0 for long: no leader reachable).",
	}, func() float64 { return b2f(cp.meta.IsCaughtUp()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sextant_meta_applied_index", Help: "Last metadata log index applied to this node's copy (it should follow the leader's).",
	}, func() float64 { return float64(cp.meta.State().Applied()) }))
	if cp.membership == nil {
		return
	}
	members := prometheus.NewDesc("sextant_cluster_members", "Cluster members as gossip sees them, by state (alive, failed, left).", []string{"state"}, nil)
	reg.MustRegister(collectorFunc{desc: members, collect: func(ch chan<- prometheus.Metric) {
		counts := map[membership.State]int{membership.StateAlive: 0, membership.StateFailed: 0, membership.StateLeft: 0}
		for _, m := range cp.membership.Members() {
			counts[m.State]++
		}
		for st, c := range counts {
			ch <- prometheus.MustNewConstMetric(members, prometheus.GaugeValue, float64(c), string(st))
		}
	}})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectorFunc is a collector of one labelled metric computed at scrape
// time.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

var _ prometheus.Collector = collectorFunc{}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
