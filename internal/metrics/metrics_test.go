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
