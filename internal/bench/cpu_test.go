package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLossDoesNotDiluteCPU: when deliveries are missing, the drain waits
// cfg.Drain for them; the CPU sample that ends the measured run is the one
// taken when the last delivery was seen, not after that idle wait, so the
// cores figure is CPU over the run.
func TestLossDoesNotDiluteCPU(t *testing.T) {
	r := &runner{cfg: Config{Drain: time.Second}}
	s := newSubscriber(0, 1, &shard{h: newHistogram()})
	r.subs = []*subscriber{s}
	r.pubs = []*publisher{{sent: []int64{10}}} // ten owed, none arrives
	start := time.Now()
	end := r.drain(context.Background())
	if !end.at.Before(start.Add(r.cfg.Drain)) {
		t.Fatalf("the run's CPU sample was taken %v after the drain began, past the %v idle wait", end.at.Sub(start), r.cfg.Drain)
	}
}

// TestNotesWithoutBrokerPID: without --broker-pid the notes do not print a
// broker figure of 0.00 cores; they say the rest of the machine includes
// the broker.
func TestNotesWithoutBrokerPID(t *testing.T) {
	r := &runner{}
	res := &Result{}
	ncpu := numCPU()
	before := sample{at: time.Unix(0, 0)}
	after := sample{at: time.Unix(1, 0)}
	after.sys.Busy = float64(ncpu) // the whole machine busy for the second
	after.gen.CPU = 100 * time.Millisecond
	r.cpu(res, before, after, 0)
	notes := strings.Join(res.Notes, "\n")
	if strings.Contains(notes, "broker 0.00") || !strings.Contains(notes, "broker") {
		t.Fatalf("notes %q", notes)
	}
}
