package sequenced

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
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

// gateFSM applies a batch only when its gate is opened.
type gateFSM struct {
	orderFSM
	gate chan struct{}
}

func (f *gateFSM) Apply(es []replication.Entry) ([]sequencer.Result, error) {
	<-f.gate
	return f.orderFSM.Apply(es)
}

// TestFenceWaitsForABatchBeingApplied: a batch the home took and the
// replica is applying (off its queue already) keeps Fence waiting until it
// is applied: the log does not change after Fence returns. (Waiting on the
// replica's queue length let such a batch through, and the handover missed
// it.)
func TestFenceWaitsForABatchBeingApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &gateFSM{gate: make(chan struct{})}
		s, err := replication.NewSingle[sequencer.Result]("g", f, replication.SingleConfig{NodeID: "h"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h := NewHome(oneGroup{&replicas.Replica{ID: "g", Rep: s}}, nil, nil)
		ctx := context.Background()
		served := make(chan Status, 1)
		go func() { served <- h.serve(ctx, "a", request{Group: "g", Stream: 1, N: 1, Cmd: []byte("x")}).Status }()
		synctest.Wait() // the batch is off the queue, its Apply waits at the gate
		fenced := make(chan error, 1)
		go func() { fenced <- h.Fence(ctx, "g", "n2") }()
		synctest.Wait()
		select {
		case err := <-fenced:
			t.Fatalf("Fence returned (%v) while a batch was being applied", err)
		default:
		}
		close(f.gate)
		if err := <-fenced; err != nil {
			t.Fatal(err)
		}
		if st := <-served; st != StatusOK {
			t.Fatalf("the batch: %v", st)
		}
		if o := f.order(); !slices.Equal(o, []string{"x"}) {
			t.Fatalf("applied %v", o)
		}
	})
}

// TestFenceEndsTheStream: a stream's batch answered "moving" ends the
// stream; its next batch, pipelined behind it, is stale even if the fence
// was lifted (the move failed) before it came. Submitting it would put its
// publishes ahead of the refused batch's, which the access node sends
// again in a new stream: a publisher's order broken across a failed
// move (the process test once saw m-0303 delivered where m-0302 was due).
func TestFenceEndsTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newTestHome(t)
		ctx := context.Background()
		serve := func(stream, n uint64, cmd string) response {
			return h.serve(ctx, "a", request{Group: "g", Stream: stream, N: n, Cmd: []byte(cmd)})
		}
		if r := serve(1, 1, "m-0301"); r.Status != StatusOK {
			t.Fatalf("before the fence: %+v", r)
		}
		if err := h.Fence(ctx, "g", "n2"); err != nil {
			t.Fatal(err)
		}
		if r := serve(1, 2, "m-0302"); r.Status != StatusMoving {
			t.Fatalf("fenced: %+v, want moving", r)
		}
		h.Unfence("g", "", false) // the move failed
		if r := serve(1, 3, "m-0303"); r.Status != StatusStale {
			t.Fatalf("the batch after a refused one, same stream: %+v, want stale", r)
		}
		// The access node's new stream sends both again, in order.
		if r := serve(2, 1, "m-0302"); r.Status != StatusOK {
			t.Fatalf("new stream: %+v", r)
		}
		if r := serve(2, 2, "m-0303"); r.Status != StatusOK {
			t.Fatalf("new stream: %+v", r)
		}
		if o := f.order(); !slices.Equal(o, []string{"m-0301", "m-0302", "m-0303"}) {
			t.Fatalf("applied %v, want m-0301 m-0302 m-0303", o)
		}
	})
}
