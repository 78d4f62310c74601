package delivery

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	feeds     prometheus.Gauge
	moves     prometheus.Counter
	polls     *prometheus.CounterVec
	delivered prometheus.Counter
	lost      prometheus.Counter
	corrupt   prometheus.Counter
	replays   prometheus.Counter
	replayed  prometheus.Counter
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		feeds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_delivery_feeds",
			Help: "Placement groups this node follows for its local subscribers."}),
		moves: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_delivery_feed_moves_total",
			Help: "Times a feed moved to another replica (a new home, or the home failing)."}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_delivery_polls_total",
			Help: "Polls of other nodes (and this one) for records, by result."}, []string{"result"}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_delivery_records_total",
			Help: "Records of sequenced topics delivered to local subscribers (by feeds and replays)."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_delivery_lost_records_total",
			Help: "Positions of group logs that retention removed before this node delivered them (a lagging feed, a session's backlog or replay)."}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_delivery_corrupt_records_total",
			Help: "Records whose message did not decode (not delivered)."}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_delivery_replays_total",
			Help: "Replays of a group's history to a session started (sx-from, a persistent session's backlog)."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_delivery_replayed_records_total",
			Help: "Records offered to sessions by replays."}),
	}
	for _, res := range []string{"ok", "failed"} {
		m.polls.WithLabelValues(res)
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.feeds, m.moves, m.polls, m.delivered, m.lost, m.corrupt, m.replays, m.replayed} {
			_ = r.Register(c)
		}
	}
	return m
}
