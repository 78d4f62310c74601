package cluster

import "github.com/prometheus/client_golang/prometheus"

// Takeover outcomes, the values of the result label of
// sextant_cluster_takeovers_total.
const (
	takeoverNone   = "none"   // no session elsewhere (or it was on this node)
	takeoverMoved  = "moved"  // a session moved here from another node
	takeoverLost   = "lost"   // the holder is not alive: a fresh session
	takeoverFailed = "failed" // the owner or holder could not be reached
)

type clusterMetrics struct {
	forwarded       prometheus.Counter
	remoteFilters   prometheus.Gauge
	corrupt         prometheus.Counter
	retainedApplied prometheus.Counter
	retainedStale   prometheus.Counter
	takeovers       map[string]prometheus.Counter
	handOversOut    prometheus.Counter
	moving          prometheus.Gauge
	staleSessions   prometheus.Counter
	relayed         prometheus.Counter // relay.go
	relayDropped    prometheus.Counter
}

func newClusterMetrics(r prometheus.Registerer) *clusterMetrics {
	if r == nil {
		r = prometheus.NewRegistry()
	}
	takeovers := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_cluster_takeovers_total",
		Help: "Client connections that looked up their session in the cluster, by result."}, []string{"result"})
	m := &clusterMetrics{
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_forwarded_total",
			Help: "Messages forwarded to other nodes (one per target node)."}),
		remoteFilters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_cluster_remote_filters",
			Help: "Filters announced by other nodes (one per node and filter)."}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_corrupt_messages_total",
			Help: "Messages from peers that could not be decoded."}),
		retainedApplied: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_retained_applied_total",
			Help: "Retained updates from peers applied here."}),
		retainedStale: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_retained_stale_total",
			Help: "Retained updates from peers ignored as older than what is held (or deleted)."}),
		handOversOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_sessions_handed_over_total",
			Help: "Sessions moved from this node to another (counted when the new node confirms)."}),
		moving: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_cluster_sessions_moving",
			Help: "Sessions sent to another node and kept here until it confirms it has them."}),
		staleSessions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_stale_sessions_total",
			Help: "Sessions dropped here because their client had connected to another node meanwhile."}),
		takeovers: map[string]prometheus.Counter{},
	}
	m.relayed, m.relayDropped = relayMetrics(r)
	for _, res := range []string{takeoverNone, takeoverMoved, takeoverLost, takeoverFailed} {
		m.takeovers[res] = takeovers.WithLabelValues(res)
	}
	for _, c := range []prometheus.Collector{m.forwarded, m.remoteFilters, m.corrupt, m.retainedApplied, m.retainedStale,
		takeovers, m.handOversOut, m.moving, m.staleSessions} {
		_ = r.Register(c) // a second layer on one registry keeps working, unexported
	}
	return m
}
