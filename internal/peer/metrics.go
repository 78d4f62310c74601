package peer

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Drop reasons, the values of the reason label of
// sextant_peer_dropped_messages_total.
const (
	// DropQueueFull: a QoS 0 message dropped (the oldest waiting one, or the
	// new one when no QoS 0 message was waiting) because the peer's outbox
	// was full.
	DropQueueFull = "queue_full"
	// DropBlocked: a QoS 1/2 message that waited BlockTimeout for room in a
	// full outbox of a reachable peer, then was dropped.
	DropBlocked = "blocked_timeout"
	// DropLinkDown: a QoS 1/2 message that found the outbox full while the
	// peer had no path, direct or through a transit node (it does not wait
	// then).
	DropLinkDown = "link_down"
	// DropRemoved: messages still in the outbox, waiting or unacknowledged,
	// when the peer was removed (it failed or left the cluster) or the
	// manager closed.
	DropRemoved = "link_removed"
	// DropNoLink: a message for a node with no link at all.
	DropNoLink = "no_link"
)

var dropReasons = []string{DropQueueFull, DropBlocked, DropLinkDown, DropRemoved, DropNoLink}

// Reasons a transit frame was dropped, the values of the reason label of
// sextant_peer_transit_dropped_total, whose peer label is the link it was
// to be written on: the destination, for a frame passing through this
// node between two others (its origin sends the messages again), or the
// transit node, for this node's own retained updates (the retained sync on
// the next direct connection makes up for them).
const (
	// TransitQueueFull: the connection to the destination had TransitBytes
	// of transit frames waiting.
	TransitQueueFull = "queue_full"
	// TransitNoLink: no connection to the destination (or it ended with
	// frames waiting).
	TransitNoLink = "no_link"
	// TransitLoop: the frame had already gone through a transit node; it is
	// never passed on twice.
	TransitLoop = "loop"
)

var transitReasons = []string{TransitQueueFull, TransitNoLink, TransitLoop}

// LostOriginRestarted is the reason label of
// sextant_peer_lost_messages_total: messages a peer had numbered (this node
// saw their numbers) and this node never received, when that peer showed
// up with a new incarnation (it restarted, losing what it held
// unacknowledged).
const LostOriginRestarted = "origin_restarted"

// metrics is the peer layer's metric set; every series is labelled with
// the peer's node id. A removed peer's gauges are deleted.
type metrics struct {
	unacked          *prometheus.GaugeVec
	path             *prometheus.GaugeVec
	resent           *prometheus.CounterVec
	duplicates       *prometheus.CounterVec
	early            *prometheus.CounterVec
	lost             *prometheus.CounterVec
	transitForwarded *prometheus.CounterVec
	transitDropped   *prometheus.CounterVec

	peers struct {
		sync.Mutex
		m map[string]*linkMetrics
	}

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
		unacked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_unacked_messages",
			Help: "QoS 1/2 messages sent to a peer and not yet acknowledged by it."}, []string{"peer"}),
		path: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_path",
			Help: "How a peer is reached: 1 directly, 2 through a transit node, 0 not at all."}, []string{"peer"}),
		resent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_resent_messages_total",
			Help: "Unacknowledged QoS 1/2 messages sent to a peer again (new path or connection, resend timeout)."}, []string{"peer"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_duplicate_messages_total",
			Help: "Forwarded messages from a peer received again and skipped (already delivered)."}, []string{"peer"}),
		early: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_early_messages_total",
			Help: "Forwarded messages from a peer skipped because an earlier one was missing (the peer sends them again)."}, []string{"peer"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_lost_messages_total",
			Help: "Forwarded messages a peer numbered that never arrived, by reason."}, []string{"peer", "reason"}),
		transitForwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_transit_frames_total",
			Help: "Frames between two other nodes passed on to a peer by this node (as their transit node)."}, []string{"peer"}),
		transitDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_transit_dropped_total",
			Help: "Frames between two other nodes this node could not pass on to a peer, by reason."}, []string{"peer", "reason"}),
		queueMessages: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_queue_messages",
			Help: "Forwarded messages in a peer's outbox: waiting, or sent and not yet acknowledged."}, []string{"peer"}),
		queueBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_queue_bytes",
			Help: "Bytes of forwarded messages in a peer's outbox."}, []string{"peer"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sextant_peer_link_up",
			Help: "1 while the link to a peer is connected."}, []string{"peer"}),
		sentMessages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_sent_messages_total",
			Help: "Forwarded and retained messages sent to a peer."}, []string{"peer"}),
		recvMessages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_peer_received_messages_total",
			Help: "Forwarded and retained messages received from a peer (directly or through a transit node) and delivered."}, []string{"peer"}),
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
	m.peers.m = map[string]*linkMetrics{}
	for _, c := range []prometheus.Collector{m.queueMessages, m.queueBytes, m.up, m.sentMessages, m.recvMessages,
		m.sentBytes, m.recvBytes, m.dropped, m.reconnects, m.resets, m.unacked, m.path, m.resent, m.duplicates,
		m.early, m.lost, m.transitForwarded, m.transitDropped} {
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
	queueMessages, queueBytes, up, unacked, path prometheus.Gauge
	sentMessages, recvMessages                   prometheus.Counter
	sentBytes, recvBytes                         prometheus.Counter
	reconnects, resets                           prometheus.Counter
	resent, duplicates, early, transitForwarded  prometheus.Counter
	dropped, transitDropped                      map[string]prometheus.Counter
}

// forPeer returns node id's series (a peer with a link, or an origin or
// destination of transit frames), resolving them the first time.
func (m *metrics) forPeer(id string) *linkMetrics {
	m.peers.Lock()
	defer m.peers.Unlock()
	if lm := m.peers.m[id]; lm != nil {
		return lm
	}
	lm := &linkMetrics{
		queueMessages:    m.queueMessages.WithLabelValues(id),
		queueBytes:       m.queueBytes.WithLabelValues(id),
		up:               m.up.WithLabelValues(id),
		unacked:          m.unacked.WithLabelValues(id),
		path:             m.path.WithLabelValues(id),
		sentMessages:     m.sentMessages.WithLabelValues(id),
		recvMessages:     m.recvMessages.WithLabelValues(id),
		sentBytes:        m.sentBytes.WithLabelValues(id),
		recvBytes:        m.recvBytes.WithLabelValues(id),
		reconnects:       m.reconnects.WithLabelValues(id),
		resets:           m.resets.WithLabelValues(id),
		resent:           m.resent.WithLabelValues(id),
		duplicates:       m.duplicates.WithLabelValues(id),
		early:            m.early.WithLabelValues(id),
		transitForwarded: m.transitForwarded.WithLabelValues(id),
		dropped:          map[string]prometheus.Counter{},
		transitDropped:   map[string]prometheus.Counter{},
	}
	for _, r := range dropReasons {
		lm.dropped[r] = m.dropped.WithLabelValues(id, r)
	}
	for _, r := range transitReasons {
		lm.transitDropped[r] = m.transitDropped.WithLabelValues(id, r)
	}
	m.peers.m[id] = lm
	return lm
}

// forget deletes a removed peer's gauges; its counters stay (so drops
// counted when it was removed remain visible) until the process restarts.
// A peer added again resolves its series anew.
func (m *metrics) forget(id string) {
	for _, v := range []*prometheus.GaugeVec{m.queueMessages, m.queueBytes, m.up, m.unacked, m.path} {
		v.DeleteLabelValues(id)
	}
	m.peers.Lock()
	delete(m.peers.m, id)
	m.peers.Unlock()
}
