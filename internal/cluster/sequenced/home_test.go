package sequenced

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
)

// orderFSM records the commands applied, in order.
type orderFSM struct {
	mu      sync.Mutex
	applied uint64
	cmds    []string
}

func (f *orderFSM) Applied() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *orderFSM) Apply(es []replication.Entry) ([]sequencer.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]sequencer.Result, len(es))
	for i, e := range es {
		f.cmds = append(f.cmds, string(e.Cmd))
		f.applied = e.Index
		out[i].Publishes = []sequencer.Published{{Index: e.Index, Seq: e.Index}}
	}
	return out, nil
}

func (f *orderFSM) Snapshot() (replication.Snapshot, error) { return nil, nil }
func (f *orderFSM) Restore(io.Reader) error                 { return nil }

func (f *orderFSM) order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

type oneGroup struct{ r *replicas.Replica }

func (g oneGroup) Get(id string) *replicas.Replica {
	if id == g.r.ID {
		return g.r
	}
	return nil
}

func (g oneGroup) Await(_ context.Context, id string, _ time.Duration) *replicas.Replica {
	return g.Get(id)
}

func (g oneGroup) HandingOver(string) (string, bool) { return "", false }

func newTestHome(t *testing.T) (*Home, *orderFSM) {
	t.Helper()
	f := &orderFSM{}
	s, err := replication.NewSingle[sequencer.Result]("g", f, replication.SingleConfig{NodeID: "h"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return NewHome(oneGroup{&replicas.Replica{ID: "g", Rep: s}}, nil, nil), f
}

// TestHomeSubmitsAStreamInOrder: batches of one stream that arrive out of
// order (as concurrent requests on a peer link may be served) enter the
// log in their numbers' order; a batch of another access node's stream is
// not held up by them.
func TestHomeSubmitsAStreamInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newTestHome(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		got := map[string]Status{}
		var mu sync.Mutex
		serve := func(node string, stream, n uint64, cmd string) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := h.serve(ctx, node, request{Group: "g", Stream: stream, N: n, Cmd: []byte(cmd)})
				mu.Lock()
				got[cmd] = r.Status
				mu.Unlock()
			}()
			synctest.Wait() // it has arrived (and waits, if it is early)
		}
		serve("a", 10, 3, "a3")
		serve("a", 10, 2, "a2")
		serve("b", 5, 1, "b1") // another access node: not held up
		if o := f.order(); !slices.Equal(o, []string{"b1"}) {
			t.Fatalf("applied %v before a's first batch came; want only b1", o)
		}
		serve("a", 10, 1, "a1")
		wg.Wait()
		if o := f.order(); !slices.Equal(o, []string{"b1", "a1", "a2", "a3"}) {
			t.Fatalf("applied %v, want b1 a1 a2 a3", o)
		}
		for cmd, s := range got {
			if s != StatusOK {
				t.Errorf("%s: %v", cmd, s)
			}
		}
	})
}

// TestHomeStaleStreams: a newer stream of the same access node makes the
// older one's waiting batches stale (nothing of them is submitted), a
// batch of the older stream arriving later is stale too, and a batch that
// waits longer than turnTimeout for its predecessor breaks its stream.
func TestHomeStaleStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newTestHome(t)
		ctx := context.Background()
		res := make(chan Status, 8)
		async := func(stream, n uint64, cmd string) {
			go func() { res <- h.serve(ctx, "a", request{Group: "g", Stream: stream, N: n, Cmd: []byte(cmd)}).Status }()
			synctest.Wait()
		}
		async(1, 2, "old2") // waits for old1, which never comes
		if s := h.serve(ctx, "a", request{Group: "g", Stream: 2, N: 1, Cmd: []byte("new1")}).Status; s != StatusOK {
			t.Fatalf("new stream's first batch: %v", s)
		}
		if s := <-res; s != StatusStale {
			t.Fatalf("old stream's waiting batch: %v, want stale", s)
		}
		if s := h.serve(ctx, "a", request{Group: "g", Stream: 1, N: 1, Cmd: []byte("old1")}).Status; s != StatusStale {
			t.Fatalf("old stream's late batch: %v, want stale", s)
		}
		async(2, 3, "new3")                   // new2 is lost
		time.Sleep(turnTimeout + time.Second) // lint:sleep-ok fake time: past the turn timeout
		if s := <-res; s != StatusStale {
			t.Fatalf("batch whose predecessor never came: %v, want stale", s)
		}
		if s := h.serve(ctx, "a", request{Group: "g", Stream: 2, N: 2, Cmd: []byte("new2")}).Status; s != StatusStale {
			t.Fatalf("a broken stream's batch: %v, want stale", s)
		}
		if o := f.order(); !slices.Equal(o, []string{"new1"}) {
			t.Fatalf("applied %v, want only new1", o)
		}
		if s := h.serve(ctx, "a", request{Group: "x", Stream: 3, N: 1, Cmd: []byte("x")}).Status; s != StatusNoReplica {
			t.Fatalf("unknown group: %v", s)
		}
	})
}
