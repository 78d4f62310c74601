package sequenced

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/sequencer/replica"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// oneNodeMeta is the metadata of a node running alone: the policy and the
// group records it creates.
type oneNodeMeta struct {
	mu     sync.Mutex
	st     fsm.State
	ix     uint64
	behind chan struct{} // CaughtUp while the test holds the copy behind (nil: caught up)
}

func newOneNodeMeta(t *testing.T, node string, rules ...fsm.Rule) *oneNodeMeta {
	m := &oneNodeMeta{}
	for _, c := range []fsm.Command{fsm.RegisterNode(fsm.Node{ID: node, Labels: fsm.Labels{Tier: "core"}, JoinedAt: time.Now()}), fsm.PutPolicies(rules)} {
		if _, res := m.apply(c); res.Err() != nil {
			t.Fatal(res.Err())
		}
	}
	return m
}

func (m *oneNodeMeta) apply(c fsm.Command) (fsm.State, fsm.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ix++
	var res fsm.Result
	m.st, res = m.st.Apply(m.ix, c)
	return m.st, res
}

func (m *oneNodeMeta) State() fsm.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

func (m *oneNodeMeta) Changed() <-chan struct{} { return nil } // the records here never change

var caughtUp = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (m *oneNodeMeta) CaughtUp() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.behind != nil {
		return m.behind
	}
	return caughtUp
}

func (m *oneNodeMeta) CreateGroup(_ context.Context, g fsm.Group) (fsm.Group, bool, error) {
	_, res := m.apply(fsm.CreateGroup(g))
	if res.Group == nil {
		return fsm.Group{}, false, res.Err()
	}
	return *res.Group, res.Err() == nil, nil
}

// recordingFSM is a group's sequencer that records the payloads it
// appended (duplicates not), in log order.
type recordingFSM struct {
	*replica.FSM
	mu       sync.Mutex
	payloads []string
}

func (f *recordingFSM) Apply(es []replication.Entry) ([]sequencer.Result, error) {
	res, err := f.FSM.Apply(es)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, e := range es {
		cmd, derr := sequencer.DecodeCommand(e.Cmd)
		if derr != nil || i >= len(res) {
			continue
		}
		for j, p := range cmd.Publishes {
			if j < len(res[i].Publishes) && res[i].Publishes[j].Duplicate {
				continue
			}
			if m, merr := message.Decode(p.Message); merr == nil {
				f.payloads = append(f.payloads, string(m.Payload))
			}
		}
	}
	return res, err
}

func (f *recordingFSM) order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.payloads)
}

// countAcker counts the acknowledgements of one publish.
type countAcker struct {
	mu    sync.Mutex
	codes []packet.ReasonCode
}

func (a *countAcker) Ack(code packet.ReasonCode) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.codes = append(a.codes, code)
}

func (a *countAcker) acked() []packet.ReasonCode {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.codes)
}

// TestFailedMovesKeepThePublisherOrder: one publisher streams QoS 1
// publishes through the access node's Router (several batches of one
// stream in flight) to the group's home while the home is fenced for a
// move and the fence is lifted again (the move failed), many times, at
// seeded random points. The group's log holds every publish once, in the
// publisher's order. (The home used to take the batch after one it had
// answered "moving" once the fence was lifted: that batch's publishes
// were appended ahead of the refused ones.)
func TestFailedMovesKeepThePublisherOrder(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			synctest.Test(t, func(t *testing.T) { failedMovesUnderTraffic(t, seed) })
		})
	}
}

func failedMovesUnderTraffic(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	meta := newOneNodeMeta(t, "a", fsm.Rule{Match: "mv/#", Mode: fsm.Sequenced, Replicas: 1})
	gid, _, ok := meta.State().GroupFor("mv/t")
	if !ok {
		t.Fatal("mv/t is not sequenced")
	}
	seq, err := sequencer.Open(topiclog.OSFS{}, t.TempDir(), sequencer.Options{BatchEntries: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &recordingFSM{FSM: replica.New(seq)}
	rep, err := replication.NewSingle[sequencer.Result](replication.GroupID(gid), f, replication.SingleConfig{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	home := NewHome(oneGroup{&replicas.Replica{ID: gid, Rep: rep, Seq: seq}}, nil, nil)
	r, err := New(Config{NodeID: "a", Meta: meta, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r.Close()
		_ = rep.Close()
		_ = seq.Close()
	}()

	const n = 1500
	acks := make([]*countAcker, n)
	done := make(chan struct{})
	// The publisher, with its own generator: bursts, a pause between them.
	prng := rand.New(rand.NewPCG(seed, ^seed))
	go func() {
		defer close(done)
		for i := 0; i < n; {
			for b := 1 + prng.IntN(40); b > 0 && i < n; b-- {
				acks[i] = &countAcker{}
				m := &message.Message{Topic: "mv/t", Payload: fmt.Appendf(nil, "m-%04d", i), QoS: 1}
				r.Publish("pub", uint16(i%65535+1), m, acks[i])
				i++
				runtime.Gosched()
			}
			time.Sleep(time.Duration(prng.IntN(3)) * time.Millisecond) // lint:sleep-ok fake time: the publisher's pace
		}
	}()
	ctx := context.Background()
	moves := 0
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		if err := home.Fence(ctx, gid, "b"); err != nil {
			t.Fatal(err)
		}
		for k := rng.IntN(50); k > 0; k-- {
			runtime.Gosched() // lifted while batches are in flight
		}
		home.Unfence(gid, "", false) // the move failed
		moves++
		time.Sleep(time.Duration(rng.IntN(2)) * time.Millisecond) // lint:sleep-ok fake time: between moves
	}
	for i := range n {
		for len(acks[i].acked()) == 0 {
			time.Sleep(time.Millisecond) // lint:sleep-ok fake time: waiting for the acknowledgements
		}
		if c := acks[i].acked(); !slices.Equal(c, []packet.ReasonCode{packet.Success}) {
			t.Fatalf("publish %d acknowledged %v", i, c)
		}
	}
	got := f.order()
	for i := range n {
		want := fmt.Sprintf("m-%04d", i)
		if i >= len(got) || got[i] != want {
			t.Fatalf("after %d failed moves: log position %d holds %q, want %q (log %d records)", moves, i, at(got, i), want, len(got))
		}
	}
	if len(got) != n {
		t.Fatalf("log holds %d records, want %d", len(got), n)
	}
	t.Logf("%d publishes in order across %d failed moves", n, moves)
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(nothing)"
}
