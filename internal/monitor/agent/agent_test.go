package agent

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/procstat"
)

type client string

func (c client) ClientID() string         { return string(c) }
func (c client) AccessRTT() time.Duration { return 3 * time.Millisecond }

// Every interval the agent sends a numbered report with the node's load
// over the interval and the tracker's topics; reports that cannot be sent
// are counted and the next one still comes.
func TestAgentReportsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := monitor.NewTracker(monitor.Limits{})
		var (
			mu      sync.Mutex
			got     []monitor.Report
			refuse  atomic.Bool
			cpu     atomic.Int64
			msgs    atomic.Uint64
			netByte atomic.Uint64
		)
		a, err := New(Config{
			Node: "edge-1", Tracker: tr, Interval: 5 * time.Second,
			Capacity:   monitor.Capacity{CPUs: 2, Memory: 1 << 30, Network: 1e6},
			Coordinate: func() *coordinate.Coordinate { return &coordinate.Coordinate{Vec: []float64{0.01, 0}, Height: 0.0001} },
			Counters: func() Counters {
				return Counters{NetBytes: netByte.Load(), MsgIn: msgs.Load(), MsgOut: 2 * msgs.Load()}
			},
			Process: func() (procstat.Sample, error) {
				return procstat.Sample{CPU: time.Duration(cpu.Load()), RSSKiB: 256 << 10}, nil
			},
			Send: func(_ context.Context, b []byte) error {
				if refuse.Load() {
					return errors.New("no leader")
				}
				r, err := monitor.DecodeReport(b)
				if err != nil {
					t.Errorf("undecodable report: %v", err)
				}
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.Run(ctx)
		}()
		defer func() {
			cancel()
			<-done
		}()
		// Each interval: 5 s of CPU on 2 cores (50%), 500 messages in and
		// 1,000 out, 1 MB of traffic (20% of 1 MB/s), a producer publishing.
		for i := 0; i < 3; i++ {
			cpu.Add(int64(5 * time.Second))
			msgs.Add(500)
			netByte.Add(1_000_000)
			for range 50 {
				tr.Published(client("drone"), "swarm/1/pos")
			}
			refuse.Store(i == 1)
			time.Sleep(5 * time.Second) // lint:sleep-ok advances the bubble's clock by one interval
			synctest.Wait()
		}
		if sent, failed := a.Stats(); sent != 2 || failed != 1 {
			t.Fatalf("sent %d, failed %d; want 2 and 1", sent, failed)
		}
		mu.Lock()
		defer mu.Unlock()
		near := func(x, y float64) bool { return math.Abs(x-y) < 1e-6 }
		for i, r := range got {
			if r.Node != "edge-1" || r.Seq != uint64([]int{1, 3}[i]) || r.Window != 5*time.Second || r.Coord == nil {
				t.Fatalf("report %d: %+v", i, r)
			}
			l := r.Load
			if !near(l.CPU, 0.5) || !near(l.Memory, 0.25) || !near(l.Network, 0.2) || !near(l.MsgIn, 100) || !near(l.MsgOut, 200) {
				t.Fatalf("report %d: load %+v", i, l)
			}
			if len(r.Topics) != 1 || r.Topics[0].Producers != (monitor.Side{Count: 1, MaxRTT: 3 * time.Millisecond, Rate: 10}) {
				t.Fatalf("report %d: topics %+v", i, r.Topics)
			}
		}
		if got[0].Incarnation != got[1].Incarnation {
			t.Fatal("incarnation changed within one process")
		}
	})
}

func TestAgentConfig(t *testing.T) {
	tr := monitor.NewTracker(monitor.Limits{})
	send := func(context.Context, []byte) error { return nil }
	for name, cfg := range map[string]Config{
		"no node":      {Tracker: tr, Send: send},
		"no tracker":   {Node: "n", Send: send},
		"no send":      {Node: "n", Tracker: tr},
		"negative":     {Node: "n", Tracker: tr, Send: send, Interval: -1},
		"long window":  {Node: "n", Tracker: tr, Send: send, Interval: monitor.MaxWindow + 1},
		"negative cpu": {Node: "n", Tracker: tr, Send: send, Capacity: monitor.Capacity{CPUs: -1}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	a, err := New(Config{Node: "n", Tracker: tr, Send: send})
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.Capacity.CPUs < 1 || a.cfg.Capacity.Memory <= 0 {
		t.Fatalf("default capacity %+v", a.cfg.Capacity)
	}
}
