package sequenced

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestHomeFence: a fenced group's batches are answered "moving" with the
// target and nothing of them is submitted; after the switch they are
// answered "not leader" naming the new home, for redirectFor; a fence
// lifted after a failed move takes batches again.
func TestHomeFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newTestHome(t)
		ctx := context.Background()
		serve := func(stream, n uint64, cmd string) response {
			return h.serve(ctx, "a", request{Group: "g", Stream: stream, N: n, Cmd: []byte(cmd)})
		}
		if r := serve(1, 1, "before"); r.Status != StatusOK {
			t.Fatalf("before the fence: %+v", r)
		}
		if err := h.Fence(ctx, "g", "n2"); err != nil {
			t.Fatal(err)
		}
		if r := serve(1, 2, "fenced"); r.Status != StatusMoving || r.Leader != "n2" {
			t.Fatalf("fenced: %+v, want moving to n2", r)
		}
		h.Unfence("g", "", false) // the move failed
		if r := serve(2, 1, "after-failure"); r.Status != StatusOK {
			t.Fatalf("after a failed move: %+v", r)
		}
		if err := h.Fence(ctx, "g", "n3"); err != nil {
			t.Fatal(err)
		}
		h.Unfence("g", "n3", true) // switched
		if r := serve(3, 1, "moved"); r.Status != StatusNotLeader || r.Leader != "n3" {
			t.Fatalf("after the switch: %+v, want not leader n3", r)
		}
		time.Sleep(redirectFor + time.Second) // lint:sleep-ok fake time: past the redirect
		if r := serve(4, 1, "later"); r.Status != StatusOK {
			t.Fatalf("after the redirect expired: %+v", r)
		}
		if o := f.order(); !slices.Equal(o, []string{"before", "after-failure", "later"}) {
			t.Fatalf("applied %v", o)
		}
	})
}
