package directory

import "github.com/prometheus/client_golang/prometheus"

// Takeover outcomes, the values of the result label of
// sextant_cluster_takeovers_total.
const (
	takeoverNone   = "none"   // no session elsewhere (or it was on this node)
	takeoverMoved  = "moved"  // a session moved here from another node
	takeoverLost   = "lost"   // the holder is not alive: a fresh session
	takeoverFailed = "failed" // the owner or holder could not be reached
)

type dirMetrics struct {
	takeovers     map[string]prometheus.Counter
	handOversOut  prometheus.Counter
	moving        prometheus.Gauge
	staleSessions prometheus.Counter
}

func newMetrics(r prometheus.Registerer) *dirMetrics {
	takeovers := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_cluster_takeovers_total",
		Help: "Client connections that looked up their session in the cluster, by result."}, []string{"result"})
	m := &dirMetrics{
		handOversOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_sessions_handed_over_total",
			Help: "Sessions moved from this node to another (counted when the new node confirms)."}),
		moving: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_cluster_sessions_moving",
			Help: "Sessions sent to another node and kept here until it confirms it has them."}),
		staleSessions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_stale_sessions_total",
			Help: "Sessions dropped here because their client had connected to another node meanwhile."}),
		takeovers: map[string]prometheus.Counter{},
	}
	for _, res := range []string{takeoverNone, takeoverMoved, takeoverLost, takeoverFailed} {
		m.takeovers[res] = takeovers.WithLabelValues(res)
	}
	if r != nil {
		for _, c := range []prometheus.Collector{takeovers, m.handOversOut, m.moving, m.staleSessions} {
			_ = r.Register(c) // a second layer on one registry keeps working, unexported
		}
	}
	return m
}
