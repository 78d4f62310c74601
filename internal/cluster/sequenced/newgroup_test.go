package sequenced

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/sequencer/replica"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// lateGroups is a node whose replica of its one group opens when the test
// says so: until then the home has none, as on a node whose replica set
// has not caught up with a record just created. Await does not wait, so
// that the access node's handling of the answer is what is tested.
type lateGroups struct {
	r    *replicas.Replica
	open atomic.Bool
}

func (g *lateGroups) Get(id string) *replicas.Replica {
	if id == g.r.ID && g.open.Load() {
		return g.r
	}
	return nil
}

func (g *lateGroups) Await(_ context.Context, id string, _ time.Duration) *replicas.Replica {
	return g.Get(id)
}

func (g *lateGroups) HandingOver(string) (string, bool) { return "", false }

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestNewGroupQoS0BurstBeforeTheReplicaOpens: a new group's first QoS 0
// publishes reach its home before the home's replica of the group is
// open (the home answers no_replica). Nothing entered the log, so the
// access node keeps them and sends them again; once the replica opens
// every one is in the log, in order, and none is counted dropped. (They
// were dropped as of unknown outcome, counted "failover".)
func TestNewGroupQoS0BurstBeforeTheReplicaOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newOneNodeMeta(t, "a", fsm.Rule{Match: "ng/#", Mode: fsm.Sequenced, Replicas: 1})
		gid, _, ok := meta.State().GroupFor("ng/t")
		if !ok {
			t.Fatal("ng/t is not sequenced")
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
		groups := &lateGroups{r: &replicas.Replica{ID: gid, Rep: rep, Seq: seq}}
		home := NewHome(groups, nil, nil)
		r, err := New(Config{NodeID: "a", Meta: meta, Home: home})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			r.Close()
			_ = rep.Close()
			_ = seq.Close()
		}()

		const n = 3000
		for i := range n {
			m := &message.Message{Topic: "ng/t", Payload: fmt.Appendf(nil, "m-%04d", i)}
			if !r.Publish("pub", 0, m, nil) {
				t.Fatal("ng/t not taken")
			}
		}
		synctest.Wait() // the first batches answered no_replica; the route backs off
		if got := counterValue(t, home.metrics.batches.WithLabelValues(StatusNoReplica.String())); got == 0 {
			t.Fatal("the home answered no batch no_replica: the test did not reach its case")
		}
		groups.open.Store(true)
		deadline := time.Now().Add(10 * time.Second)
		for len(f.order()) < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // lint:sleep-ok fake time: waiting for the log
		}
		got := f.order()
		for _, reason := range dropReasons {
			if d := counterValue(t, r.metrics.dropped.WithLabelValues(reason)); d != 0 {
				t.Errorf("%v publishes dropped (%s)", d, reason)
			}
		}
		if len(got) != n {
			t.Fatalf("log holds %d records, want %d", len(got), n)
		}
		for i := range n {
			if want := fmt.Sprintf("m-%04d", i); got[i] != want {
				t.Fatalf("log position %d holds %q, want %q", i, got[i], want)
			}
		}
	})
}

// TestRouteHoldsUntilTheCopyCaughtUp: an access node whose metadata copy
// has not caught up since it started (restarted behind: its record may
// name a home the group left) sends nothing to the home its copy names;
// the publishes wait and are all taken, in order, once it caught up.
func TestRouteHoldsUntilTheCopyCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newOneNodeMeta(t, "a", fsm.Rule{Match: "ng/#", Mode: fsm.Sequenced, Replicas: 1})
		gid, _, ok := meta.State().GroupFor("ng/t")
		if !ok {
			t.Fatal("ng/t is not sequenced")
		}
		behind := make(chan struct{})
		meta.behind = behind
		seq, err := sequencer.Open(topiclog.OSFS{}, t.TempDir(), sequencer.Options{BatchEntries: true})
		if err != nil {
			t.Fatal(err)
		}
		f := &recordingFSM{FSM: replica.New(seq)}
		rep, err := replication.NewSingle[sequencer.Result](replication.GroupID(gid), f, replication.SingleConfig{NodeID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		groups := &lateGroups{r: &replicas.Replica{ID: gid, Rep: rep, Seq: seq}}
		groups.open.Store(true)
		home := NewHome(groups, nil, nil)
		r, err := New(Config{NodeID: "a", Meta: meta, Home: home})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			r.Close()
			_ = rep.Close()
			_ = seq.Close()
		}()
		const n = 20
		for i := range n {
			m := &message.Message{Topic: "ng/t", QoS: 1, Payload: fmt.Appendf(nil, "m-%02d", i)}
			if !r.Publish("pub", uint16(i+1), m, nil) {
				t.Fatal("ng/t not taken")
			}
		}
		time.Sleep(time.Minute) // lint:sleep-ok fake time: a route not held would have sent long ago
		synctest.Wait()
		if got := len(f.order()); got != 0 {
			t.Fatalf("%d publishes reached the home before the copy caught up", got)
		}
		if _, ok := meta.State().Group(gid); ok {
			t.Fatal("the held route created the group")
		}
		meta.mu.Lock()
		meta.behind = nil
		meta.mu.Unlock()
		close(behind)
		deadline := time.Now().Add(10 * time.Second)
		for len(f.order()) < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // lint:sleep-ok fake time: waiting for the log
		}
		got := f.order()
		if len(got) != n {
			t.Fatalf("log holds %d records after the copy caught up, want %d", len(got), n)
		}
		for i := range n {
			if want := fmt.Sprintf("m-%02d", i); got[i] != want {
				t.Fatalf("log position %d holds %q, want %q", i, got[i], want)
			}
		}
	})
}

// twoAlive is a Cluster of two alive nodes, a and b, 10 ms apart, as node
// a sees it just after it started: its own arrival not taken in yet.
type twoAlive struct{}

func (twoAlive) Alive() []string { return []string{"b"} }

func (twoAlive) EstimateRTT(x, y string) (time.Duration, bool) { return 10 * time.Millisecond, true }

// TestNewGroupWaitsForThisNodesRegistration: a group's first publish on a
// node whose own registration has not reached its metadata copy yet (it
// registers just after it starts) creates nothing and waits; once the
// node is registered the group is created with this node as its home,
// even though its membership view does not list itself yet.
// Before, the group went to the other registered node: a test of `sextant
// topics` found a group homed on the subscriber's node under load.
func TestNewGroupWaitsForThisNodesRegistration(t *testing.T) {
	rule := fsm.Rule{Match: "ng/#", Mode: fsm.Sequenced, Replicas: 1}
	// b is registered, a (this node) not yet; the home side hosts nothing.
	meta := newOneNodeMeta(t, "b", rule)
	home := NewHome(&lateGroups{r: &replicas.Replica{ID: "none"}}, nil, nil)
	r, err := New(Config{NodeID: "a", Meta: meta, Home: home, Cluster: twoAlive{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	gid, _, ok := meta.State().GroupFor("ng/t")
	if !ok {
		t.Fatal("ng/t is not sequenced")
	}
	if _, err := r.create(t.Context(), gid, rule); !errors.Is(err, errNotReady) {
		t.Fatalf("create before this node registered: %v, want errNotReady", err)
	}
	if _, exists := meta.State().Group(gid); exists {
		t.Fatal("a group was created before this node registered")
	}
	if _, res := meta.apply(fsm.RegisterNode(fsm.Node{ID: "a", Labels: fsm.Labels{Tier: "core"}, JoinedAt: time.Now()})); res.Err() != nil {
		t.Fatal(res.Err())
	}
	g, err := r.create(t.Context(), gid, rule)
	if err != nil {
		t.Fatal(err)
	}
	if g.Home != "a" {
		t.Fatalf("the group's home is %s, want a (the publisher's access node)", g.Home)
	}
}
