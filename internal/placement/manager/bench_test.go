package manager

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/monitor"
)

// BenchmarkRound is one timer round on the leader: 32 nodes reporting,
// groups each with producers on one node and consumers on two others
// (8-dimensional coordinates), none violated: the snapshot (folding every
// group's clients, E(t) on its home) and a planning round with nothing to
// move. Run with -benchtime=1x or a few.
func BenchmarkRound(b *testing.B) {
	for _, groups := range []int{1000, 10_000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			const nodes = 32
			f := &fakeMeta{}
			f.leader.Store(true)
			ids := make([]string, nodes)
			for i := range ids {
				ids[i] = fmt.Sprintf("n%02d", i)
				f.Propose(context.Background(), fsm.RegisterNode(fsm.Node{ID: ids[i], Labels: fsm.Labels{Tier: fsm.TierCore}, JoinedAt: t0}))
			}
			f.Propose(context.Background(), fsm.PutPolicies([]fsm.Rule{{Match: "g/#", Mode: fsm.Sequenced, LatencyMS: 500}}))
			topics := make([][]monitor.TopicReport, nodes)
			for g := range groups {
				home := g % nodes
				name := fmt.Sprintf("g/%05d", g)
				f.Propose(context.Background(), fsm.CreateGroup(fsm.Group{ID: name, Rule: "g/#", Home: ids[home], Voters: []string{ids[home]}, Created: t0, Retention: fsm.Retention{Messages: 1}}))
				topics[home] = append(topics[home], clients(name, 4, 0, 2, 10))
				for _, k := range []int{(home + 1) % nodes, (home + 2) % nodes} {
					topics[k] = append(topics[k], clients(name, 0, 3, 5, 10))
				}
			}
			m, err := New(Config{Interval: 5 * time.Second, Planner: defaultPlanner(b)}, f)
			if err != nil {
				b.Fatal(err)
			}
			var st runState
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for i, id := range ids {
					c := &coordinate.Coordinate{Vec: make([]float64, 8), Height: 1e-4}
					c.Vec[0], c.Vec[1] = float64(i%8)*0.01, float64(i/8)*0.01
					(&reporter{node: id, coord: c, load: monitor.Load{CPU: 0.2, MsgIn: 1000, MsgOut: 1000}, seq: st.plan.Round}).send(b, m, topics[i]...)
				}
				b.StartTimer()
				m.round(context.Background(), &st, false)
			}
			b.StopTimer()
			if st := m.Status(); len(st.Groups) != groups || len(st.Decisions) != 0 {
				b.Fatalf("planned %d groups, %d decisions", len(st.Groups), len(st.Decisions))
			}
		})
	}
}
