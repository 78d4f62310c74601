package peer

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sextantmq/sextant/internal/memnet"
)

// TestNoSeriesWithAnEmptyPeer: a message for a node without a link is
// counted under that node's id; no series has an empty peer label.
func TestNoSeriesWithAnEmptyPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: time.Millisecond})
		defer nw.Close()
		a := startNode(t, nw, "a", "10.0.0.1", Options{}, nil)
		a.mgr.Publish("ghost", &Publish{Msg: []byte("m")})
		fs, err := a.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "peer" && l.GetValue() == "" {
						t.Errorf("%s has a series with peer=\"\"", f.GetName())
					}
				}
			}
		}
		if got := testutil.ToFloat64(a.mgr.metrics.dropped.WithLabelValues("ghost", DropNoLink)); got != 1 {
			t.Fatalf("no_link drops for ghost: %v; want 1", got)
		}
	})
}
