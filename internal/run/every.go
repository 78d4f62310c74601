package run

import (
	"context"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// Every calls f after first, then every period after each call returns,
// on the caller's goroutine, until ctx ends (a call in progress is not
// interrupted; f gets ctx). It is the periodic loop of the node's parts:
// $SYS statistics, tombstone sweeps, RTT probes.
func Every(ctx context.Context, clk clock.Clock, first, period time.Duration, f func(ctx context.Context)) {
	t := clk.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		f(ctx)
		t.Reset(period)
	}
}
