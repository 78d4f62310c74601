package manager

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/monitor"
)

// fakeMeta is the metadata group of one node, applied locally: proposals
// go through fsm.State.Apply as on the leader.
type fakeMeta struct {
	leader atomic.Bool
	mu     struct {
		sync.Mutex
		state fsm.State
		index uint64
		cmds  []fsm.Command
	}
}

var _ Meta = (*fakeMeta)(nil)

var errNotLeader = errors.New("fake: not the leader")

func (f *fakeMeta) IsLeader() bool { return f.leader.Load() }

func (f *fakeMeta) State() fsm.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.state
}

func (f *fakeMeta) Propose(_ context.Context, cmd fsm.Command) (fsm.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.index++
	next, res := f.mu.state.Apply(f.mu.index, cmd)
	f.mu.state = next
	f.mu.cmds = append(f.mu.cmds, cmd)
	return res, res.Err()
}

// decisions returns the set-desired commands proposed so far.
func (f *fakeMeta) decisions() []fsm.DesiredChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fsm.DesiredChange
	for _, c := range f.mu.cmds {
		if c.Op == fsm.OpSetGroupDesired {
			out = append(out, *c.Desired)
		}
	}
	return out
}

var t0 = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// newWorld registers nodes, puts the rule `swarm/#` (sequenced, Lth
// lthMS, replicas 1) and creates groups (topic = group id) on their homes.
func newWorld(t *testing.T, lthMS int, nodes []string, groups map[string]string) *fakeMeta {
	t.Helper()
	f := &fakeMeta{}
	f.leader.Store(true)
	must := func(cmd fsm.Command) {
		t.Helper()
		if _, err := f.Propose(context.Background(), cmd); err != nil {
			t.Fatalf("%s: %v", cmd.Op, err)
		}
	}
	for _, id := range nodes {
		must(fsm.RegisterNode(fsm.Node{ID: id, Labels: fsm.Labels{Site: "s-" + id, Zone: "z", Tier: fsm.TierCore}, JoinedAt: t0}))
	}
	must(fsm.PutPolicies([]fsm.Rule{{Match: "swarm/#", Mode: fsm.Sequenced, LatencyMS: lthMS}}))
	for g, home := range groups {
		must(fsm.CreateGroup(fsm.Group{ID: g, Rule: "swarm/#", Home: home, Voters: []string{home}, Created: t0, Retention: fsm.Retention{Messages: 10}}))
	}
	return f
}

// at is a 2-D coordinate x, y milliseconds of RTT from the origin.
func at(x, y float64) *coordinate.Coordinate {
	return &coordinate.Coordinate{Vec: []float64{x / 1000, y / 1000}}
}

// reporter sends a node's reports with increasing sequence numbers.
type reporter struct {
	node  string
	coord *coordinate.Coordinate
	load  monitor.Load
	seq   uint64
}

func (r *reporter) send(t testing.TB, m *Manager, topics ...monitor.TopicReport) {
	t.Helper()
	r.seq++
	rep := monitor.Report{Node: r.node, Incarnation: 1, Seq: r.seq, Window: 5 * time.Second, Coord: r.coord, Load: r.load, Topics: topics}
	b, err := monitor.AppendReport(nil, &rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Receive(r.node, b); err != nil {
		t.Fatal(err)
	}
}

// clients is a topic entry: producers and consumers at one access node.
func clients(topic string, producers, consumers int, rttMS, rate float64) monitor.TopicReport {
	side := func(n int) monitor.Side {
		if n == 0 {
			return monitor.Side{}
		}
		return monitor.Side{Count: n, MaxRTT: time.Duration(rttMS * float64(time.Millisecond)), Rate: rate}
	}
	return monitor.TopicReport{Topic: topic, Producers: side(producers), Consumers: side(consumers)}
}

// sleep advances the bubble's fake clock.
func sleep(d time.Duration) {
	time.Sleep(d) // lint:sleep-ok advances the synctest bubble's fake clock to the next placement round
}

// background runs run until the returned stop is called, which waits for
// it to return.
func background(run func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
