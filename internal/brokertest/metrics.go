package brokertest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value reads the current value of a counter or gauge.
func Value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	return -1
}

// Dropped is the node's sextant_messages_dropped_total for reason.
func (n *Node) Dropped(reason string) float64 {
	return Value(n.Metrics().Dropped[reason])
}

// WaitSessions waits until the node's session gauges read online and
// offline. The gauges are updated last when a connection ends (after the
// session's timers are armed and its state persisted), so this is the signal
// that the broker has finished handling a disconnection.
func (n *Node) WaitSessions(online, offline int) {
	n.T.Helper()
	g := n.Metrics().SessionsCurrent
	Eventually(n.T, waitFor, func() bool {
		return Value(g.WithLabelValues("online")) == float64(online) && Value(g.WithLabelValues("offline")) == float64(offline)
	}, "session gauges")
}
