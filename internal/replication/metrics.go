package replication

import (
	"github.com/prometheus/client_golang/prometheus"

	walmetrics "github.com/hashicorp/raft-wal/metrics"
)

// Proposal results, the values of the result label of
// sextant_replication_proposals_total.
const (
	resultOK        = "ok"
	resultNotLeader = "not_leader"
	resultUnknown   = "unknown_outcome"
	resultClosed    = "closed"
	resultCanceled  = "canceled"
	resultFailed    = "failed"
)

// Pipeline events, the values of the event label of
// sextant_replication_pipelines_total.
const (
	pipelineOpened = "opened"
	pipelineFailed = "failed"
)

// Refusal reasons, the values of the reason label of
// sextant_replication_refused_connections_total.
const (
	refuseKind      = "bad_kind"
	refuseTLS       = "tls"
	refuseHeader    = "bad_header"
	refuseWrongNode = "wrong_node"
	refuseUnknown   = "unknown_group"
	refuseBusy      = "too_many_handshakes"
)

// metrics is an engine's metric set, shared by its groups. Series carry no
// group label: a node may run hundreds of groups, and per-group figures are
// in Stats.
type metrics struct {
	commit        prometheus.Histogram
	batch         prometheus.Histogram
	applied       prometheus.Counter
	skipped       prometheus.Counter
	restores      prometheus.Counter
	failures      prometheus.Counter
	leaderChanges prometheus.Counter
	coalesced     prometheus.Counter
	logWrites     prometheus.Counter
	logEntries    prometheus.Counter
	logWrite      prometheus.Histogram
	appendRPC     prometheus.Histogram
	pipelines     map[string]prometheus.Counter
	proposals     map[string]prometheus.Counter
	refused       map[string]prometheus.Counter
}

func newMetrics(r prometheus.Registerer, roles prometheus.Collector) *metrics {
	if r == nil {
		r = prometheus.NewRegistry() // private and discarded
	}
	m := &metrics{
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_replication_commit_seconds",
			Help:    "Time from a proposal's submission to its result on the leader: queueing, log write, replication to a majority and apply.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16)}),
		logWrite: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_replication_log_write_seconds",
			Help:    "Time of one append to a group's Raft log (write and fsync), on leaders and followers.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16)}),
		appendRPC: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_replication_append_rpc_seconds",
			Help:    "Round trip of one AppendEntries carrying entries, from a leader to a follower: encoding, sending, the follower's log write and its answer.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16)}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sextant_replication_apply_batch_entries",
			Help:    "Commands applied to a group's state machine in one batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_applied_entries_total",
			Help: "Commands applied to the state machines of the groups on this node (its rate is the apply rate)."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_skipped_entries_total",
			Help: "Commands Raft replayed after a restart that the state machine already held, and were not applied again."}),
		restores: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_snapshot_restores_total",
			Help: "Snapshots restored into a state machine (on start, or sent by a leader to a lagging replica)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_failures_total",
			Help: "Groups stopped because their state machine reported a fatal error."}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_leader_changes_total",
			Help: "Times a group on this node became leader (summed over nodes: the elections)."}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_leadership_notifications_coalesced_total",
			Help: "Leadership notifications replaced by a newer one before the owner read them."}),
		logWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_log_writes_total",
			Help: "Appends to the groups' Raft logs, each one write and one fsync."}),
		logEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_replication_log_entries_written_total",
			Help: "Entries appended to the groups' Raft logs (divided by log writes: entries per fsync)."}),
		proposals: map[string]prometheus.Counter{},
		pipelines: map[string]prometheus.Counter{},
		refused:   map[string]prometheus.Counter{},
	}
	props := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_replication_proposals_total",
		Help: "Proposals submitted on this node, by result."}, []string{"result"})
	for _, res := range []string{resultOK, resultNotLeader, resultUnknown, resultClosed, resultCanceled, resultFailed} {
		m.proposals[res] = props.WithLabelValues(res)
	}
	pipes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_replication_pipelines_total",
		Help: "Replication pipelines from a leader to a follower: opened, and stopped by a failed or refused append (the leader then replicates one request at a time from the follower's last acknowledged entry, and pipelines again once one succeeds)."},
		[]string{"event"})
	for _, ev := range []string{pipelineOpened, pipelineFailed} {
		m.pipelines[ev] = pipes.WithLabelValues(ev)
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sextant_replication_refused_connections_total",
		Help: "Inbound group connections refused, by reason."}, []string{"reason"})
	for _, reason := range []string{refuseKind, refuseTLS, refuseHeader, refuseWrongNode, refuseUnknown, refuseBusy} {
		m.refused[reason] = refused.WithLabelValues(reason)
	}
	for _, c := range []prometheus.Collector{m.commit, m.batch, m.applied, m.skipped, m.restores, m.failures,
		m.leaderChanges, m.coalesced, m.logWrites, m.logEntries, m.logWrite, m.appendRPC, props, pipes, refused, roles} {
		_ = r.Register(c) // a second engine on one registry shares the first one's series
	}
	return m
}

// walCollector counts raft-wal's appends into the engine's metrics.
type walCollector struct{ m *metrics }

var _ walmetrics.Collector = walCollector{}

func (c walCollector) IncrementCounter(name string, delta uint64) {
	switch name {
	case "log_appends":
		c.m.logWrites.Add(float64(delta))
	case "log_entries_written":
		c.m.logEntries.Add(float64(delta))
	}
}

func (walCollector) SetGauge(string, uint64) {}

// roleCollector reports the engine's groups by role when scraped.
type roleCollector struct {
	desc  *prometheus.Desc
	count func() map[Role]int
}

var _ prometheus.Collector = (*roleCollector)(nil)

func newRoleCollector(count func() map[Role]int) *roleCollector {
	return &roleCollector{
		desc: prometheus.NewDesc("sextant_replication_groups", "Replicated groups open on this node, by this node's role in them.",
			[]string{"role"}, nil),
		count: count,
	}
}

func (c *roleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *roleCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.count()
	for _, r := range roles {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[r]), string(r))
	}
}
