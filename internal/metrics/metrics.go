package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Drop reasons, the values of the reason label of sextant_messages_dropped_total.
const (
	DropQueueFull     = "queue_full"     // a session queue was full (oldest QoS 0 dropped first)
	DropExpired       = "expired"        // the message expired before delivery
	DropTooLarge      = "too_large"      // larger than the client's Maximum Packet Size
	DropSessionQuota  = "session_quota"  // a persistent session's stored queue was at its bound
	DropSlowConsumer  = "slow_consumer"  // lost with a non-persistent session disconnected as slow
	DropNotAuthorized = "not_authorized" // refused by access control
	DropNoSubscribers = "no_subscribers" // published where nobody listens
	DropMovedAway     = "moved_away"     // relayed to a node that no longer held the session (it moved on or ended)
)

// Abuse limits, the values of the limit label of sextant_limits_hit_total.
const (
	LimitConnsPerIP    = "connections_per_ip" // a connection closed at accept: its address had too many
	LimitConnectRate   = "connect_rate"       // a CONNECT refused with 0x9F
	LimitPublishRate   = "publish_rate"       // a client paused or disconnected for publishing too many messages
	LimitPublishBytes  = "publish_bytes"      // a client paused or disconnected for publishing too many bytes
	LimitAuthFailDelay = "auth_fail_delay"    // a refusal held back after failed authentication
)

// Limits are the values of the limit label of sextant_limits_hit_total.
var Limits = []string{LimitConnsPerIP, LimitConnectRate, LimitPublishRate, LimitPublishBytes, LimitAuthFailDelay}

// DeniedActions are the values of the action label of
// sextant_access_denied_total.
var DeniedActions = []string{"publish", "subscribe", "receive", "will"}

// RefusalReasons are the reason codes a node refuses a CONNECT with (the
// reason label of sextant_connections_refused_total is the code's name).
var RefusalReasons = []packet.ReasonCode{
	packet.UnspecifiedError, packet.ClientIdentifierNotValid, packet.BadUserNameOrPassword, packet.NotAuthorized,
	packet.ServerUnavailable, packet.ServerBusy, packet.BadAuthenticationMethod, packet.TopicNameInvalid,
	packet.PayloadFormatInvalid, packet.ConnectionRateExceeded,
}

// ProtocolErrorReasons are the reason codes a node closes a connection with
// for bad input (the reason label of sextant_protocol_errors_total).
var ProtocolErrorReasons = []packet.ReasonCode{
	packet.MalformedPacket, packet.ProtocolError, packet.UnsupportedProtocolVersion, packet.PacketTooLarge,
	packet.TopicNameInvalid, packet.TopicAliasInvalid, packet.ReceiveMaximumExceeded, packet.PayloadFormatInvalid,
}

// Node is the metric set of one node: its MQTT broker, sessions and store
// (the cluster layer and peer links register their own in Registry).
type Node struct {
	Registry *prometheus.Registry

	ConnectionsCurrent prometheus.Gauge
	ConnectionsTotal   prometheus.Counter
	ConnectionsRefused *prometheus.CounterVec // by reason code name
	SessionsCurrent    *prometheus.GaugeVec   // state=online|offline
	Subscriptions      prometheus.Gauge
	RetainedMessages   prometheus.Gauge

	MessagesIn  [3]prometheus.Counter // by QoS
	MessagesOut [3]prometheus.Counter // by QoS
	BytesIn     prometheus.Counter
	BytesOut    prometheus.Counter
	PacketsIn   prometheus.Counter
	PacketsOut  prometheus.Counter

	dropped          *prometheus.CounterVec
	Dropped          map[string]prometheus.Counter
	QueuedMessages   *Level // messages waiting in session queues, all sessions
	InflightMessages *Level // QoS 1/2 messages sent and not yet acknowledged
	SlowConsumers    prometheus.Counter
	Panics           prometheus.Counter
	ProtocolErrors   *prometheus.CounterVec // by reason code name
	LimitsHit        *prometheus.CounterVec // by limit (the Limit* constants)
	AccessDenied     *prometheus.CounterVec // by action: publish, subscribe, receive, will

	ProcsChanges *prometheus.CounterVec // by to: narrow, wide

	StoreCommitSeconds prometheus.Histogram
	StoreSyncSeconds   prometheus.Histogram
	StoreBatchOps      prometheus.Histogram
}

// NewNode creates the node metric set in a fresh registry that also
// carries the Go runtime and process collectors.
func NewNode() *Node {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{r}
	m := &Node{
		Registry:           r,
		ConnectionsCurrent: f.gauge("sextant_connections", "Client connections currently open."),
		ConnectionsTotal:   f.counter("sextant_connections_total", "Client connections accepted (CONNACK success)."),
		ConnectionsRefused: f.counterVec("sextant_connections_refused_total", "Connections refused, by reason.", "reason"),
		SessionsCurrent:    f.gaugeVec("sextant_sessions", "Sessions held, by state.", "state"),
		Subscriptions:      f.gauge("sextant_subscriptions", "Subscriptions held by local sessions."),
		RetainedMessages:   f.gauge("sextant_retained_messages", "Retained messages held."),
		BytesIn:            f.counter("sextant_bytes_received_total", "Bytes read from clients."),
		BytesOut:           f.counter("sextant_bytes_sent_total", "Bytes written to clients."),
		PacketsIn:          f.counter("sextant_packets_received_total", "MQTT packets read from clients."),
		PacketsOut:         f.counter("sextant_packets_sent_total", "MQTT packets written to clients."),
		dropped:            f.counterVec("sextant_messages_dropped_total", "Messages not delivered to a subscriber, by reason.", "reason"),
		QueuedMessages:     f.level("sextant_queued_messages", "Messages waiting in session queues."),
		InflightMessages:   f.level("sextant_inflight_messages", "QoS 1/2 messages sent to clients and not yet acknowledged."),
		SlowConsumers:      f.counter("sextant_slow_consumers_total", "Subscribers that could not keep up past the slow-consumer timeout."),
		Panics:             f.counter("sextant_panics_total", "Panics recovered in connection handlers (each one is a bug)."),
		ProtocolErrors:     f.counterVec("sextant_protocol_errors_total", "Connections closed for bad input, by reason.", "reason"),
		LimitsHit:          f.counterVec("sextant_limits_hit_total", "Times an abuse limit refused, paused or disconnected a client, by limit.", "limit"),
		AccessDenied:       f.counterVec("sextant_access_denied_total", "Operations refused by access control, by action.", "action"),
		ProcsChanges:       f.counterVec("sextant_procs_changes_total", "Changes of the processors running Go code (procs: 0 adapts them to the load), by direction: narrow (to one) or wide (to all).", "to"),
		StoreCommitSeconds: f.histogram("sextant_store_commit_seconds", "Store transaction write time.", prometheus.ExponentialBuckets(50e-6, 2, 16)),
		StoreSyncSeconds:   f.histogram("sextant_store_sync_seconds", "Time of each point at which the store's writes became durable: with fsync=always each commit (bbolt writes and fdatasyncs twice inside it), with batch and never each explicit fsync.", prometheus.ExponentialBuckets(50e-6, 2, 16)),
		StoreBatchOps:      f.histogram("sextant_store_batch_ops", "Operations per store transaction (group commit size).", prometheus.ExponentialBuckets(1, 2, 14)),
	}
	in := f.counterVec("sextant_messages_received_total", "PUBLISH messages received from clients, by QoS.", "qos")
	out := f.counterVec("sextant_messages_sent_total", "PUBLISH messages sent to clients, by QoS.", "qos")
	for q, l := range []string{"0", "1", "2"} {
		m.MessagesIn[q] = in.WithLabelValues(l)
		m.MessagesOut[q] = out.WithLabelValues(l)
	}
	// The series operators alert on exist from the start at zero, so that
	// a rate or an alert has a baseline before the first event.
	for _, c := range RefusalReasons {
		m.ConnectionsRefused.WithLabelValues(c.String())
	}
	for _, c := range ProtocolErrorReasons {
		m.ProtocolErrors.WithLabelValues(c.String())
	}
	for _, l := range Limits {
		m.LimitsHit.WithLabelValues(l)
	}
	for _, a := range DeniedActions {
		m.AccessDenied.WithLabelValues(a)
	}
	m.ProcsChanges.WithLabelValues("narrow")
	m.ProcsChanges.WithLabelValues("wide")
	m.Dropped = map[string]prometheus.Counter{}
	for _, r := range []string{DropQueueFull, DropExpired, DropTooLarge, DropSessionQuota, DropSlowConsumer, DropNotAuthorized, DropNoSubscribers, DropMovedAway} {
		m.Dropped[r] = m.dropped.WithLabelValues(r)
	}
	return m
}

// Drop counts n messages dropped for reason (one of the Drop* constants).
func (m *Node) Drop(reason string, n int) {
	if c, ok := m.Dropped[reason]; ok {
		c.Add(float64(n))
		return
	}
	m.dropped.WithLabelValues(reason).Add(float64(n))
}

type factory struct{ r *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.r.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.r.MustRegister(g)
	return g
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.r.MustRegister(c)
	return c
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.r.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.r.MustRegister(h)
	return h
}

// Value reads the current value of counters (summed), for $SYS.
func Value(cs ...prometheus.Counter) float64 {
	var sum float64
	for _, c := range cs {
		var m dto.Metric
		if err := c.Write(&m); err == nil && m.Counter != nil {
			sum += m.Counter.GetValue()
		}
	}
	return sum
}
