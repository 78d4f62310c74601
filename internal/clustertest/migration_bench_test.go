package clustertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/migration"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestMigrationBenchmark measures 128 sequenced topics (a group of one
// replica each) moved at once from n2 to n3, with 16 executors and with 1,
// the setting of ePulsar's Fig. 7 (the 000 paper in the seeds): per topic,
// the migration time (from the decisions to its end, queueing included),
// the pause the old home measured (fence to the new home serving) and the
// longest acknowledgement wait of the topic's publisher during the moves
// (one QoS 1 publisher per topic on n1, one publish in flight, one every
// 10 ms). Three nodes on memnet in fake time: n1 leads the metadata group
// (the placement manager's node), n2 and n3 are the brokers. The metadata
// group has n1 as its only voter (n2 and n3 keep read copies: edge nodes),
// or all three as voters, when a commit waits a round trip from n1 to one
// of the brokers. The figures are round trips and timeouts, not CPU: fake
// time does not advance while goroutines run. BENCHMARKS.md has the
// results.
//
// Set SEXTANT_MIGRATION_BENCH=1 to run it (about a minute of CPU). One
// row alone: -run 'TestMigrationBenchmark/replicas_3,_all_20ms_apart,_3_metadata_voters/executors=16';
// SEXTANT_MIGRATION_SEED=N seeds the network's jitter (default 1).
func TestMigrationBenchmark(t *testing.T) {
	if os.Getenv("SEXTANT_MIGRATION_BENCH") == "" {
		t.Skip("set SEXTANT_MIGRATION_BENCH=1 to run the migration benchmark (BENCHMARKS.md)")
	}
	var seed uint64 = 1
	if v := os.Getenv("SEXTANT_MIGRATION_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("SEXTANT_MIGRATION_SEED=%q: want a positive integer", v)
		}
		seed = n
	}
	ms := time.Millisecond
	far := [][]time.Duration{{0, 80 * ms, 80 * ms}, {80 * ms, 0, 20 * ms}, {80 * ms, 20 * ms, 0}}
	all20 := [][]time.Duration{{0, 20 * ms, 20 * ms}, {20 * ms, 0, 20 * ms}, {20 * ms, 20 * ms, 0}}
	// Replicas 3: the lead moves to another voter (n2 to n3; n1 is the
	// third voter of every group).
	for _, setting := range []struct {
		name                 string
		rtt                  [][]time.Duration
		replicas, metaVoters int
	}{
		{"brokers 20ms apart, metadata leader 80ms from each", far, 1, 1},
		{"all 20ms apart", all20, 1, 1},
		{"all 20ms apart, 3 metadata voters", all20, 1, 3},
		{"replicas 3, all 20ms apart", all20, 3, 1},
		{"replicas 3, all 20ms apart, 3 metadata voters", all20, 3, 3},
	} {
		for _, executors := range []int{16, 1} {
			t.Run(fmt.Sprintf("%s/executors=%d", setting.name, executors), func(t *testing.T) {
				benchMigrations(t, seed, setting.rtt, executors, 128, setting.replicas, setting.metaVoters)
			})
		}
	}
}

func benchMigrations(t *testing.T, seed uint64, rtt [][]time.Duration, executors, topics, replicas, metaVoters int) {
	synctest.Test(t, func(t *testing.T) {
		opts := []func(*Options){func(o *Options) {
			o.Seed = seed
			o.Config = func(cfg *config.Config) { cfg.PlacementExecutors = executors }
		}}
		if metaVoters == 3 {
			opts = append(opts, coreNodes) // after: it keeps the executors
		}
		c := Start(t, 3, rtt, opts...)
		c.SetPolicy(fsm.Rule{Match: "bench/#", Mode: fsm.Sequenced, Replicas: replicas})
		creator := c.Node(1).Connect("creator", ConnectOptions{})
		names := make([]string, topics)
		for i := range names {
			names[i] = fmt.Sprintf("bench/%03d", i)
			if code := creator.Publish(names[i], 1, false, "first"); code != packet.Success {
				t.Fatalf("first publish on %s: %v", names[i], code)
			}
		}
		meta := c.Node(0).Node.Meta()
		from, to := c.Node(1).ID, c.Node(2).ID
		leader, _ := meta.Leader()
		c.Eventually("the metadata voters", func() bool {
			vs, err := meta.Voters(context.Background())
			return err == nil && len(vs) == metaVoters
		})
		t.Logf("metadata leader: %s, voters %d", leader, metaVoters)
		for _, n := range names {
			if g, _ := meta.State().Group(n); g.Home != from {
				t.Fatalf("%s homed on %s, want %s", n, g.Home, from)
			}
		}
		// One publisher per topic on n1.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		type sample struct {
			at, took time.Duration
		}
		lat := make([][]sample, topics)
		start := time.Now()
		for i, n := range names {
			cl := c.Node(0).Connect(fmt.Sprintf("p%03d", i), ConnectOptions{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					t0 := time.Now()
					_, res := cl.PublishAsync(n, 1, fmt.Sprint(k), 0)
					if r := <-res; r.Err != nil || r.Code != packet.Success {
						t.Errorf("%s: publish %d: %v %v", n, k, r.Code, r.Err)
						return
					}
					lat[i] = append(lat[i], sample{at: t0.Sub(start), took: time.Since(t0)})
					time.Sleep(10 * time.Millisecond) // lint:sleep-ok fake time: the publisher's pace
				}
			}()
		}
		time.Sleep(500 * time.Millisecond) // lint:sleep-ok fake time: steady traffic before the moves
		decided := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var pwg sync.WaitGroup
		for _, n := range names {
			g, _ := meta.State().Group(n)
			pwg.Add(1)
			go func() {
				defer pwg.Done()
				voters := []string{to}
				if replicas > 1 {
					voters = []string{to, from, c.Node(0).ID}
				}
				if _, err := meta.Propose(ctx, fsm.SetGroupDesired(fsm.DesiredChange{Group: g.ID, Epoch: g.Epoch, Home: to,
					Voters: voters, Reason: fsm.ReasonManual, At: time.Now()})); err != nil {
					t.Errorf("decision for %s: %v", n, err)
				}
			}()
		}
		pwg.Wait()
		c.Eventually("every topic moved", func() bool {
			for _, n := range names {
				if g, _ := meta.State().Group(n); g.Home != to || g.Desired != nil {
					return false
				}
			}
			return true
		})
		allDone := time.Since(decided)
		time.Sleep(200 * time.Millisecond) // lint:sleep-ok fake time: traffic after the moves
		close(stop)
		wg.Wait()
		var total, pause, ackMax, after []time.Duration
		steps := map[string][]time.Duration{}
		for _, m := range c.Node(1).Node.Migrations().Migrations() {
			if m.Kind == migration.KindSettle {
				continue
			}
			if m.State != "done" {
				t.Errorf("migration %+v", m)
				continue
			}
			total = append(total, m.Started.Add(m.Total).Sub(decided))
			pause = append(pause, m.Pause)
			for _, s := range m.Steps {
				steps[string(s.Op)] = append(steps[string(s.Op)], s.Took)
			}
		}
		from0 := decided.Sub(start)
		for _, s := range lat {
			var worst time.Duration
			for _, x := range s {
				if x.at >= from0-50*time.Millisecond && x.at <= from0+allDone {
					worst = max(worst, x.took)
				}
				if x.at > from0+allDone+50*time.Millisecond {
					after = append(after, x.took)
				}
			}
			ackMax = append(ackMax, worst)
		}
		if len(total) != topics {
			t.Errorf("%d migrations recorded, want %d", len(total), topics)
		}
		t.Logf("executors %d, %d topics: all moved %v after the decisions", executors, topics, allDone)
		t.Logf("  per-topic migration time (decisions to done): median %v p90 %v", quantile(total, 0.5), quantile(total, 0.9))
		t.Logf("  pause (fence to the new home serving, timed by its answer): median %v p90 %v", quantile(pause, 0.5), quantile(pause, 0.9))
		for _, op := range []string{"send_snapshot", "fence", "send_tail_switch", "propose_home", "transfer_leadership", "unfence", "await_target"} {
			t.Logf("  step %s: median %v p90 %v max %v", op, quantile(steps[op], 0.5), quantile(steps[op], 0.9), quantile(steps[op], 1))
		}
		t.Logf("  publisher's longest acknowledgement wait during the moves: median %v p90 %v (after the moves, a publish takes median %v)",
			quantile(ackMax, 0.5), quantile(ackMax, 0.9), quantile(after, 0.5))
	})
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
