package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestTwoNodesHaveSeparateRegistries(t *testing.T) {
	a, b := NewNode(), NewNode()
	a.MessagesIn[1].Inc()
	if got := testutil.ToFloat64(b.MessagesIn[1]); got != 0 {
		t.Fatalf("node b sees node a's count: %v", got)
	}
}

func TestDropIsLabelledByReason(t *testing.T) {
	m := NewNode()
	m.Drop(DropQueueFull, 3)
	m.Drop("custom", 1)
	want := `
# HELP sextant_messages_dropped_total Messages not delivered to a subscriber, by reason.
# TYPE sextant_messages_dropped_total counter
sextant_messages_dropped_total{reason="custom"} 1
sextant_messages_dropped_total{reason="expired"} 0
sextant_messages_dropped_total{reason="moved_away"} 0
sextant_messages_dropped_total{reason="no_subscribers"} 0
sextant_messages_dropped_total{reason="not_authorized"} 0
sextant_messages_dropped_total{reason="queue_full"} 3
sextant_messages_dropped_total{reason="session_quota"} 0
sextant_messages_dropped_total{reason="slow_consumer"} 0
sextant_messages_dropped_total{reason="too_large"} 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "sextant_messages_dropped_total"); err != nil {
		t.Fatal(err)
	}
}

// TestAlertedCountersStartAtZero: the counters docs/security.md tells
// operators to watch exist before they first fire, at zero, with every
// label value the node uses.
func TestAlertedCountersStartAtZero(t *testing.T) {
	m := NewNode()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			if got[f.GetName()] == nil {
				got[f.GetName()] = map[string]float64{}
			}
			for _, l := range s.GetLabel() {
				got[f.GetName()][l.GetValue()] = s.GetCounter().GetValue()
			}
		}
	}
	want := map[string][]string{
		"sextant_connections_refused_total": {"not authorized (0x87)", "bad user name or password (0x86)", "connection rate exceeded (0x9F)", "server busy (0x89)"},
		"sextant_protocol_errors_total":     {"malformed packet (0x81)", "protocol error (0x82)", "packet too large (0x95)"},
		"sextant_limits_hit_total":          Limits,
		"sextant_access_denied_total":       {"publish", "subscribe", "receive", "will"},
	}
	for name, labels := range want {
		for _, l := range labels {
			v, ok := got[name][l]
			if !ok || v != 0 {
				t.Errorf("%s{%q}: present %v, value %v; want present at 0 (have %v)", name, l, ok, v, got[name])
			}
		}
	}
}

func TestLevelIsScrapedAsAGauge(t *testing.T) {
	m := NewNode()
	for range 5 {
		m.QueuedMessages.Inc()
	}
	m.QueuedMessages.Dec()
	m.QueuedMessages.Add(-2)
	m.InflightMessages.Add(7)
	want := `
# HELP sextant_queued_messages Messages waiting in session queues.
# TYPE sextant_queued_messages gauge
sextant_queued_messages 2
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "sextant_queued_messages"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.InflightMessages); got != 7 {
		t.Fatalf("in flight scraped as %v, want 7", got)
	}
}
