package broker

import (
	"testing"

	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/session"
)

type countingObserver struct {
	monitor.Observer
	published int
}

func (o *countingObserver) Published(monitor.Client, string) { o.published++ }

// Telling the monitor of a sequenced publish allocates nothing: the client
// is the session's pointer, its round trip read only at report time.
func TestObservedPublishDoesNotAllocate(t *testing.T) {
	o := &countingObserver{}
	var obs monitor.Observer = o
	s := new(session.Session)
	if n := testing.AllocsPerRun(100, func() { obs.Published(accessClient{s}, "seq/t") }); n != 0 {
		t.Fatalf("%v allocations per observed publish, want 0", n)
	}
	if o.published == 0 {
		t.Fatal("not observed")
	}
}
