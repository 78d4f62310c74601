package migration

import (
	"context"
	"fmt"

	"github.com/sextantmq/sextant/internal/clock"
)

// AwaitServing waits until node serves group (its replica open and
// leading), asking it over the peer links (an await, answered once it
// serves or after a second; a failed call is made again 100 ms later)
// until ctx ends. An operator's move of a group of one replica waits for
// it: the record names the target from the switch's commit, before the
// target has the log and serves.
func AwaitServing(ctx context.Context, peers Caller, clk clock.Clock, node, group string) error {
	if peers == nil {
		return errNoPeers
	}
	if clk == nil {
		clk = clock.Real{}
	}
	x := &exec{d: &Driver{cfg: Config{Peers: peers}, clock: clk}}
	for {
		resp, err := x.call(ctx, node, request{Kind: reqAwait, Group: group})
		if err == nil && resp.Open && resp.Leader {
			return nil
		}
		if ctx.Err() != nil {
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("migration: waiting for %s to serve %s: %w", node, group, err)
		}
		if err == nil {
			continue // the await answered after a second: ask again
		}
		t := clk.NewTimer(100 * pollEvery)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("migration: waiting for %s to serve %s: %w", node, group, err)
		}
	}
}
