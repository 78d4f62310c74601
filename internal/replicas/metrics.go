package replicas

import "github.com/prometheus/client_golang/prometheus"

// metrics are the set's own; the replication engine exports the groups'
// Raft figures (sextant_replication_*).
type metrics struct {
	open             prometheus.Gauge
	openFailures     prometheus.Counter
	homeClaims       prometheus.Counter
	handovers        prometheus.Counter
	retentionRemoved prometheus.Counter
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_groups_open",
			Help: "Placement groups this node runs a replica of."}),
		openFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_open_failures_total",
			Help: "Attempts to open a placement group replica that failed (retried)."}),
		homeClaims: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_home_claims_total",
			Help: "Times this node recorded itself as a group's home after winning its election."}),
		handovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_handovers_total",
			Help: "Times this node, first elected leader of a new group, handed the lead to the home the group was placed on."}),
		retentionRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_retention_removed_records_total",
			Help: "Records removed by retention ticks this node proposed as a group's leader."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.open, m.openFailures, m.homeClaims, m.handovers, m.retentionRemoved} {
			_ = r.Register(c)
		}
	}
	return m
}
