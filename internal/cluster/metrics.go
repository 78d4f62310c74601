package cluster

import "github.com/prometheus/client_golang/prometheus"

// layerMetrics are the shell's own metrics; the directory and retained
// replication register theirs (same sextant_cluster_ prefix).
type layerMetrics struct {
	forwarded     prometheus.Counter
	remoteFilters prometheus.Gauge
	corrupt       prometheus.Counter
	relayed       prometheus.Counter // relay.go
	relayDropped  prometheus.Counter
}

func newLayerMetrics(r prometheus.Registerer) *layerMetrics {
	m := &layerMetrics{
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_forwarded_total",
			Help: "Messages forwarded to other nodes (one per target node)."}),
		remoteFilters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_cluster_remote_filters",
			Help: "Filters announced by other nodes (one per node and filter)."}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_corrupt_messages_total",
			Help: "Messages from peers that could not be decoded."}),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_relayed_total",
			Help: "Deliveries for sessions that moved away, relayed from this node to their new node."}),
		relayDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_relay_dropped_total",
			Help: "Deliveries for sessions that moved away that could not be relayed (no link, or its queue full)."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.forwarded, m.remoteFilters, m.corrupt, m.relayed, m.relayDropped} {
			_ = r.Register(c) // a second layer on one registry keeps working, unexported
		}
	}
	return m
}
