package migration

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	started  prometheus.Counter
	finished *prometheus.CounterVec
	running  prometheus.Gauge
	seconds  prometheus.Histogram
	pause    prometheus.Histogram
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_migrations_started_total",
			Help: "Migrations of placement groups this node started (as the group's home)."}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_migrations_finished_total",
			Help: "Migrations this node ended, by result: done, or failed (the decision stays pending and is tried again)."}, []string{"result"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_migrations_running",
			Help: "Migrations under way on this node."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_migration_seconds",
			Help: "A migration's total time, from its start on the old home to its end.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}),
		pause: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_migration_pause_seconds",
			Help:    "A migration's client-visible pause: from the fence on the old home (publishes held) to the new home's answer that it serves the group.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
	}
	for _, res := range []State{StateDone, StateFailed} {
		m.finished.WithLabelValues(string(res))
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.started, m.finished, m.running, m.seconds, m.pause} {
			_ = r.Register(c)
		}
	}
	return m
}
