package peer

import "github.com/prometheus/client_golang/prometheus"

// Drop reasons, the values of the reason label of
// sextant_peer_dropped_messages_total.
const (
	// DropQueueFull: a QoS 0 message dropped (the oldest queued one, or the
	// new one when no QoS 0 message was queued) because the link's queue was
	// full.
	DropQueueFull = "queue_full"
	// DropBlocked: a QoS 1/2 message that waited BlockTimeout for room in a
	// full queue of a connected link, then was dropped.
	DropBlocked = "blocked_timeout"
	// DropLinkDown: a QoS 1/2 message that found the queue full while the
	// link was reconnecting (it does not wait then).
	DropLinkDown = "link_down"
	// DropRemoved: messages still queued when the peer was removed (it
	// failed or left the cluster) or the manager closed.
	DropRemoved = "link_removed"
	// DropNoLink: a message for a node with no link at all.
	DropNoLink = "no_link"
)

var dropReasons = []string{DropQueueFull, DropBlocked, DropLinkDown, DropRemoved, DropNoLink}

// metrics is the peer layer's metric set; every series is labelled with
// the peer's node id. A removed peer's gauges are deleted.
type metrics struct {
	queueMessages *prometheus.GaugeVec
	queueBytes    *prometheus.GaugeVec
	up            *prometheus.GaugeVec
	sentMessages  *prometheus.CounterVec
	recvMessages  *prometheus.CounterVec
	sentBytes     *prometheus.CounterVec
	recvBytes     *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	reconnects    *prometheus.CounterVec
	resets        *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) *metrics {
	if r == nil {
		r = prometheus.NewRegistry() // private and discarded
	}
	m := &metrics{
		queueMessages: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_queue_messages",
			Help: "Forwarded messages waiting in a peer link's queue."}, []string{"peer"}),
		queueBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_queue_bytes",
			Help: "Bytes of forwarded messages waiting in a peer link's queue."}, []string{"peer"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_link_up",
			Help: "1 while the link to a peer is connected."}, []string{"peer"}),
		sentMessages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_sent_messages_total",
			Help: "Forwarded and retained messages sent to a peer."}, []string{"peer"}),
		recvMessages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_received_messages_total",
			Help: "Forwarded and retained messages received from a peer."}, []string{"peer"}),
		sentBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_sent_bytes_total",
			Help: "Bytes written to a peer link."}, []string{"peer"}),
		recvBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_received_bytes_total",
			Help: "Bytes read from a peer link."}, []string{"peer"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_dropped_messages_total",
			Help: "Forwarded messages dropped before reaching a peer, by reason."}, []string{"peer", "reason"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_reconnects_total",
			Help: "Connections to a peer established after the first one."}, []string{"peer"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_control_overflows_total",
			Help: "Connections reset because their control queue (interest, retained, requests) overflowed."}, []string{"peer"}),
	}
	for _, c := range []prometheus.Collector{m.queueMessages, m.queueBytes, m.up, m.sentMessages, m.recvMessages,
		m.sentBytes, m.recvBytes, m.dropped, m.reconnects, m.resets} {
		if err := r.Register(c); err != nil {
			// A second manager on the same registry: keep working with
			// unregistered collectors rather than fail the node.
			continue
		}
	}
	return m
}

// linkMetrics are one peer's series, resolved once.
type linkMetrics struct {
	queueMessages, queueBytes, up prometheus.Gauge
	sentMessages, recvMessages    prometheus.Counter
	sentBytes, recvBytes          prometheus.Counter
	reconnects, resets            prometheus.Counter
	dropped                       map[string]prometheus.Counter
}

func (m *metrics) forPeer(id string) *linkMetrics {
	lm := &linkMetrics{
		queueMessages: m.queueMessages.WithLabelValues(id),
		queueBytes:    m.queueBytes.WithLabelValues(id),
		up:            m.up.WithLabelValues(id),
		sentMessages:  m.sentMessages.WithLabelValues(id),
		recvMessages:  m.recvMessages.WithLabelValues(id),
		sentBytes:     m.sentBytes.WithLabelValues(id),
		recvBytes:     m.recvBytes.WithLabelValues(id),
		reconnects:    m.reconnects.WithLabelValues(id),
		resets:        m.resets.WithLabelValues(id),
		dropped:       map[string]prometheus.Counter{},
	}
	for _, r := range dropReasons {
		lm.dropped[r] = m.dropped.WithLabelValues(id, r)
	}
	return lm
}

// forget deletes a removed peer's gauges; its counters stay (so drops
// counted when it was removed remain visible) until the process restarts.
func (m *metrics) forget(id string) {
	for _, v := range []*prometheus.GaugeVec{m.queueMessages, m.queueBytes, m.up} {
		v.DeleteLabelValues(id)
	}
}
