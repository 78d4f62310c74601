package run

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// TestStopEndsContextsAndWaitWaits: goroutines see their context end at
// Stop, Wait returns only after every one returned, and nothing starts
// once the group is stopping.
func TestStopEndsContextsAndWaitWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGroup(context.Background())
		var done atomic.Int32
		release := make(chan struct{})
		for range 3 {
			if !g.Go(func(ctx context.Context) {
				<-ctx.Done()
				<-release
				done.Add(1)
			}) {
				t.Fatal("Go refused before Stop")
			}
		}
		if g.Stopped() {
			t.Fatal("stopped before Stop")
		}
		if !g.Stop() {
			t.Fatal("first Stop reported the group already stopped")
		}
		if g.Stop() {
			t.Fatal("second Stop reported stopping the group")
		}
		if g.Go(func(context.Context) { t.Error("started after Stop") }) {
			t.Fatal("Go accepted after Stop")
		}
		waited := make(chan struct{})
		go func() { g.Wait(); close(waited) }()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("Wait returned while goroutines were running")
		default:
		}
		close(release)
		<-waited
		if n := done.Load(); n != 3 {
			t.Fatalf("%d goroutines finished, want 3", n)
		}
	})
}

// TestParentEndsTheGroup: the group's context is a child of its parent.
func TestParentEndsTheGroup(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	g := NewGroup(parent)
	cancel()
	<-g.Context().Done()
	g.Stop()
	g.Wait()
}

// TestEveryRunsOnScheduleUntilTheContextEnds: f runs at first, then every
// period after each run, and not after the context ends.
func TestEveryRunsOnScheduleUntilTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		ctx, cancel := context.WithCancel(context.Background())
		Every(ctx, clock.Real{}, time.Second, 10*time.Second, func(context.Context) {
			at = append(at, time.Since(start))
			if len(at) == 3 {
				cancel()
			}
		})
		want := []time.Duration{time.Second, 11 * time.Second, 21 * time.Second}
		if !slices.Equal(at, want) {
			t.Fatalf("ran at %v, want %v", at, want)
		}
	})
}
