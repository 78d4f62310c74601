package sequenced

import "github.com/prometheus/client_golang/prometheus"

// Drop reasons: the values of the reason label of
// sextant_sequenced_dropped_total.
const (
	// DropInflightFull: the group's outstanding publishes were at
	// sequenced-inflight (a QoS 0 message at once, a QoS 1/2 one after
	// waiting; its publisher gets 0x97).
	DropInflightFull = "inflight_full"
	// DropFailover: a QoS 0 message was in a batch whose outcome is
	// unknown (its home failed, or the link to it broke): not sent again,
	// since it has no key to recognise a repeat by.
	DropFailover = "failover"
	// DropRefused: the group's state machine refused the batch (its
	// publisher gets 0x83).
	DropRefused = "refused"
	// DropUnavailable: the group could not be created (too few nodes for
	// its replicas, an invalid rule); its publisher gets 0x80.
	DropUnavailable = "unavailable"
	// DropClosed: the node stopped with the message not yet acknowledged.
	DropClosed = "closed"
	// DropHeldFull: the group's publishes were held for a migration and
	// the hold was full (sequenced-inflight): a QoS 0 message at once, a
	// QoS 1/2 one after waiting for room up to slow-consumer-timeout (its
	// publisher gets 0x97).
	DropHeldFull = "held_full"
)

var dropReasons = []string{DropInflightFull, DropFailover, DropRefused, DropUnavailable, DropClosed, DropHeldFull}

// metrics are the publish path's, on the access node and at the home.
type metrics struct {
	published   *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	retries     *prometheus.CounterVec
	commit      prometheus.Histogram
	outstanding prometheus.Gauge
	created     prometheus.Counter
	batches     *prometheus.CounterVec
	held        prometheus.Histogram
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_sequenced_publishes_total",
			Help: "Sequenced publishes this access node had committed: result new, or duplicate (a retry the group recognised)."}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_sequenced_dropped_total",
			Help: "Sequenced publishes this access node dropped, by reason."}, []string{"reason"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_sequenced_retries_total",
			Help: "Batches of sequenced publishes sent again (to the same or another replica), by why the previous attempt failed."}, []string{"reason"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_sequenced_commit_seconds",
			Help:    "From a sequenced PUBLISH's arrival at its access node to its commit (QoS 1/2: its acknowledgement).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		outstanding: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_sequenced_outstanding",
			Help: "Sequenced publishes this access node holds, not yet committed."}),
		created: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_sequenced_groups_created_total",
			Help: "Placement groups this access node created (a topic's first publish)."}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_sequenced_home_batches_total",
			Help: "Batches of sequenced publishes this node answered as a group's home (or former home), by status."}, []string{"status"}),
		held: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_sequenced_held_seconds",
			Help:    "How long this access node held a group's publishes while the group moved (from the old home's \"moving\" answer to the record naming the new home).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	for _, reason := range dropReasons {
		m.dropped.WithLabelValues(reason)
	}
	for _, res := range []string{"new", "duplicate"} {
		m.published.WithLabelValues(res)
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.published, m.dropped, m.retries, m.commit, m.outstanding, m.created, m.batches, m.held} {
			_ = r.Register(c)
		}
	}
	return m
}

func (m *metrics) served(s Status) { m.batches.WithLabelValues(s.String()).Inc() }
