package replicas

import "github.com/prometheus/client_golang/prometheus"

// metrics are the set's own; the replication engine exports the groups'
// Raft figures (sextant_replication_*). No series has a group label: a node
// may hold thousands of groups (docs/operations.md, "Sequenced topics");
// per-group figures are in GET /v1/groups.
type metrics struct {
	open             prometheus.Gauge
	appliedRecords   prometheus.Counter
	openFailures     prometheus.Counter
	homeClaims       prometheus.Counter
	claimFailures    prometheus.Counter
	handovers        prometheus.Counter
	retentionRemoved prometheus.Counter
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sextant_groups_open",
			Help: "Placement groups this node runs a replica of."}),
		appliedRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_applied_records_total",
			Help: "Records appended to the topic logs of the groups this node holds a replica of, as their state machines applied them (its rate is the apply rate; a restored snapshot does not count)."}),
		openFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_open_failures_total",
			Help: "Attempts to open a placement group replica that failed (retried)."}),
		homeClaims: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_home_claims_total",
			Help: "Times this node recorded itself as a group's home after winning its election."}),
		claimFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_home_claim_failures_total",
			Help: "Home claims after an election that failed and were tried again (no answer in time, no metadata leader reachable, this node's copy slow to apply the answer)."}),
		handovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_handovers_total",
			Help: "Times this node, first elected leader of a new group, handed the lead to the home the group was placed on."}),
		retentionRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_groups_retention_removed_records_total",
			Help: "Records removed by retention ticks this node proposed as a group's leader."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.open, m.appliedRecords, m.openFailures, m.homeClaims, m.claimFailures, m.handovers, m.retentionRemoved} {
			_ = r.Register(c)
		}
	}
	return m
}

// Values of the role label of the log-size gauges.
const (
	roleLeader   = "leader"
	roleFollower = "follower" // a follower, a learner, or a replica without a leader
)

// logCollector reports the size of the topic logs of the groups open on a
// set, summed over groups by this node's role in them, at every scrape.
type logCollector struct {
	s                        *Set
	records, bytes, segments *prometheus.Desc
	// the records kept in memory for reads near the logs' ends
	// (sequencer.RecentStats); not by role
	recentBytes, recentReads *prometheus.Desc
}

var _ prometheus.Collector = (*logCollector)(nil)

func newLogCollector(s *Set) *logCollector {
	return &logCollector{s: s,
		records: prometheus.NewDesc("sextant_groups_log_records",
			"Records held in the topic logs of the groups this node holds a replica of, by its role in them.", []string{"role"}, nil),
		bytes: prometheus.NewDesc("sextant_groups_log_bytes",
			"Bytes of the topic logs of the groups this node holds a replica of, by its role in them.", []string{"role"}, nil),
		segments: prometheus.NewDesc("sextant_groups_log_segments",
			"Segment files of the topic logs of the groups this node holds a replica of, by its role in them.", []string{"role"}, nil),
		recentBytes: prometheus.NewDesc("sextant_groups_recent_bytes",
			"Memory held by the recent records the groups open here keep for reads near their logs' ends.", nil, nil),
		recentReads: prometheus.NewDesc("sextant_groups_recent_reads_total",
			"Reads of records from a position (feeds' polls, replays) of the groups open here, by where they were answered from: memory (the recent records) or log (the segment files). Summed over the groups open now.", []string{"source"}, nil),
	}
}

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.records
	ch <- c.bytes
	ch <- c.segments
	ch <- c.recentBytes
	ch <- c.recentReads
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	type sums struct {
		records, bytes float64
		segments       float64
	}
	by := map[string]*sums{roleLeader: {}, roleFollower: {}}
	var recentBytes, hits, misses float64
	for _, r := range c.s.replicas() {
		all := r.Seq.Stats()
		recentBytes += float64(all.Recent.Bytes)
		hits += float64(all.Recent.Hits)
		misses += float64(all.Recent.Misses)
		st := all.Log
		role := roleFollower
		if r.Rep.IsLeader() {
			role = roleLeader
		}
		by[role].records += float64(st.Records)
		by[role].bytes += float64(st.Bytes)
		by[role].segments += float64(st.Segments)
	}
	for role, v := range by {
		ch <- prometheus.MustNewConstMetric(c.records, prometheus.GaugeValue, v.records, role)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, v.bytes, role)
		ch <- prometheus.MustNewConstMetric(c.segments, prometheus.GaugeValue, v.segments, role)
	}
	ch <- prometheus.MustNewConstMetric(c.recentBytes, prometheus.GaugeValue, recentBytes)
	ch <- prometheus.MustNewConstMetric(c.recentReads, prometheus.CounterValue, hits, "memory")
	ch <- prometheus.MustNewConstMetric(c.recentReads, prometheus.CounterValue, misses, "log")
}
