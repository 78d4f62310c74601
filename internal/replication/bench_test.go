package replication

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/netx"
)

var idleWindow = flag.Duration("idle-window", 10*time.Second, "how long BenchmarkIdleGroups measures CPU")

// counter is a benchmark state machine: it counts commands and holds
// nothing else, so the figures are those of replication itself.
type counter struct {
	applied atomic.Uint64
	n       uint64
}

func (c *counter) Applied() uint64 { return c.applied.Load() }

func (c *counter) Apply(entries []Entry) ([]uint64, error) {
	out := make([]uint64, len(entries))
	for i := range entries {
		c.n++
		out[i] = c.n
	}
	c.applied.Store(entries[len(entries)-1].Index)
	return out, nil
}

func (c *counter) Snapshot() (Snapshot, error) { return counterSnap(c.n), nil }
func (c *counter) Restore(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

type counterSnap uint64

func (counterSnap) Persist(w io.Writer) error { _, err := fmt.Fprint(w, "x"); return err }
func (counterSnap) Release()                  {}

// fileFSM is the state machine of the replicas-1 benchmark: Single has no
// log of its own, so the state machine writes each batch to a file and
// syncs it before returning, as the topic log will.
type fileFSM struct {
	counter
	f   *os.File
	buf []byte
}

func (f *fileFSM) Apply(entries []Entry) ([]uint64, error) {
	f.buf = f.buf[:0]
	for _, e := range entries {
		f.buf = append(f.buf, e.Cmd...)
	}
	if _, err := f.f.Write(f.buf); err != nil {
		return nil, err
	}
	if err := f.f.Sync(); err != nil {
		return nil, err
	}
	return f.counter.Apply(entries)
}

// tcpGroups starts n engines on loopback TCP ports, each with its own data
// directory, and opens and bootstraps groups named by ids on all of them.
// It returns, per group, the replicas (index 0 is node 1's).
func tcpGroups(b *testing.B, n int, groups []GroupID, tune func(*Config)) (map[GroupID][]*Group[uint64], []*prometheus.Registry) {
	b.Helper()
	var (
		engines []*Engine
		regs    []*prometheus.Registry
		ms      []Member
		lns     []net.Listener
	)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns = append(lns, ln)
		ms = append(ms, Member{ID: fmt.Sprintf("n%d", i+1), Addr: ln.Addr().String(), Voter: true})
	}
	for i := range n {
		reg := prometheus.NewRegistry()
		cfg := Config{NodeID: ms[i].ID, Addr: ms[i].Addr, Listener: lns[i], Dial: netx.DialTCP, DataDir: b.TempDir(),
			Registerer: reg, MaxGroups: 1024}
		if tune != nil {
			tune(&cfg)
		}
		e, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		engines, regs = append(engines, e), append(regs, reg)
	}
	b.Cleanup(func() {
		for _, e := range engines {
			_ = e.Close()
		}
	})
	out := map[GroupID][]*Group[uint64]{}
	for _, id := range groups {
		for _, e := range engines {
			g, err := OpenGroup(context.Background(), e, id, FSM[uint64](&counter{}))
			if err != nil {
				b.Fatal(err)
			}
			if err := g.Bootstrap(context.Background(), ms); err != nil {
				b.Fatal(err)
			}
			out[id] = append(out[id], g)
		}
	}
	for id, rs := range out {
		waitLeader(b, id, rs)
	}
	return out, regs
}

// waitLeader waits on the replicas' Leadership channels until one of them
// leads and the others know it.
func waitLeader(b *testing.B, id GroupID, rs []*Group[uint64]) *Group[uint64] {
	b.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		var lead *Group[uint64]
		agreed := true
		for _, g := range rs {
			if g.IsLeader() {
				lead = g
			}
		}
		for _, g := range rs {
			if lead == nil || g.Leader().ID != lead.e.cfg.NodeID {
				agreed = false
			}
		}
		if agreed {
			return lead
		}
		select {
		case <-rs[0].Leadership():
		case <-rs[len(rs)-1].Leadership():
		case <-time.After(5 * time.Millisecond):
		case <-deadline.C:
			b.Fatalf("group %s: no agreed leader", id)
		}
	}
}

// BenchmarkPropose measures proposals committed per second and their
// latency (submission to result on the leader) with fsync on: replicas 1
// (Single over a syncing state machine), and Raft groups of 1, 3 and 5
// replicas on loopback TCP in one process, each node with its own data
// directory; conc proposals in flight at once.
func BenchmarkPropose(b *testing.B) {
	for _, replicas := range []string{"single", "1", "3", "5"} {
		for _, conc := range []int{1, 64} {
			b.Run(fmt.Sprintf("replicas=%s/conc=%d", replicas, conc), func(b *testing.B) {
				var (
					leader func() Replica[uint64]
					regs   []*prometheus.Registry
				)
				if replicas == "single" {
					f, err := os.Create(filepath.Join(b.TempDir(), "log"))
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					s, err := NewSingle[uint64]("bench", &fileFSM{f: f}, SingleConfig{NodeID: "n1", Addr: "127.0.0.1:1"})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					leader = func() Replica[uint64] { return s }
				} else {
					var n int
					fmt.Sscan(replicas, &n)
					gs, rg := tcpGroups(b, n, []GroupID{"bench"}, nil)
					leader = func() Replica[uint64] { return waitLeader(b, "bench", gs["bench"]) }
					regs = rg
				}
				runProposals(b, leader, conc, regs)
			})
		}
	}
}

// BenchmarkProposePipeline: replicas 3 on loopback TCP with each pipeline
// depth (Config.Pipeline; 1: no pipeline), for comparing them.
func BenchmarkProposePipeline(b *testing.B) {
	for _, depth := range []int{1, 2, 4} {
		for _, conc := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("depth=%d/conc=%d", depth, conc), func(b *testing.B) {
				gs, regs := tcpGroups(b, 3, []GroupID{"bench"}, func(c *Config) { c.Pipeline = depth })
				runProposals(b, func() Replica[uint64] { return waitLeader(b, "bench", gs["bench"]) }, conc, regs)
			})
		}
	}
}

// runProposals proposes b.N commands from conc goroutines. A proposal that
// fails because leadership moved (the shared machine can starve a leader
// past its lease) is retried on the new leader and counted.
func runProposals(b *testing.B, leader func() Replica[uint64], conc int, regs []*prometheus.Registry) {
	cmd := make([]byte, 128)
	ctx := context.Background()
	var (
		next    atomic.Int64
		retries atomic.Int64
		mu      sync.Mutex
		wg      sync.WaitGroup
	)
	first := leader()
	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	writes0, entries0 := logCounters(regs)
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Go(func() {
			h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			r := first
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				for {
					_, err := r.Propose(ctx, cmd)
					if err == nil {
						break
					}
					if !errIs(err, ErrNotLeader, ErrUnknownOutcome) || retries.Add(1) > 1000 {
						b.Error(err)
						return
					}
					r = leader()
				}
				_ = h.RecordValue(time.Since(t0).Microseconds())
			}
			mu.Lock()
			hist.Merge(h)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-µs")
	b.ReportMetric(float64(retries.Load()), "retries")
	if writes, entries := logCounters(regs); writes > writes0 {
		b.ReportMetric((entries-entries0)/(writes-writes0), "entries/fsync")
	}
}

// logCounters sums log writes and entries over the registries (the
// leader's dominate: followers write what it sends in the same batches).
func logCounters(regs []*prometheus.Registry) (writes, entries float64) {
	for _, reg := range regs {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			switch mf.GetName() {
			case "sextant_replication_log_writes_total":
				writes += mf.GetMetric()[0].GetCounter().GetValue()
			case "sextant_replication_log_entries_written_total":
				entries += mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
	}
	return writes, entries
}

// BenchmarkIdleGroups runs 100 idle groups of 3 replicas on three engines
// in one process (loopback TCP) and measures the process's CPU time per
// wall second over -idle-window (default 10 s; 1 s with -short), and the
// heap per group, for several Raft timings: the heartbeat timeout sets the
// heartbeat rate (the leader sends one every tenth to fifth of it) and so
// both the idle cost and the failover time (TestFailoverAfterLeaderKill
// -failover-table).
func BenchmarkIdleGroups(b *testing.B) {
	const groups = 100
	for _, tc := range []struct {
		name string
		t    Timeouts
	}{
		{"lan", LAN()},
		{"heartbeat=100ms", Timeouts{Heartbeat: 100 * time.Millisecond, Election: 100 * time.Millisecond, LeaderLease: 50 * time.Millisecond, Commit: 50 * time.Millisecond}},
		{"heartbeat=250ms", Timeouts{Heartbeat: 250 * time.Millisecond, Election: 250 * time.Millisecond, LeaderLease: 125 * time.Millisecond, Commit: 100 * time.Millisecond}},
		{"heartbeat=500ms", Timeouts{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, LeaderLease: 250 * time.Millisecond, Commit: 100 * time.Millisecond}},
		{"heartbeat=1s", Timeouts{Heartbeat: time.Second, Election: time.Second, LeaderLease: 500 * time.Millisecond, Commit: 100 * time.Millisecond}},
		{"wan", WAN()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			var ids []GroupID
			for i := range groups {
				ids = append(ids, GroupID(fmt.Sprintf("idle/%d", i)))
			}
			tcpGroups(b, 3, ids, func(cfg *Config) {
				cfg.Timeouts = tc.t
				cfg.SegmentBytes = 64 << 10
			})
			// Let connections and pipelines settle before measuring.
			settle := time.NewTimer(2 * tc.t.Heartbeat)
			<-settle.C
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			b.ResetTimer()
			cpu0, wall0 := cpuTime(b), time.Now()
			d := *idleWindow
			if testing.Short() {
				d = time.Second
			}
			window := time.NewTimer(d)
			<-window.C
			cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
			b.StopTimer()
			cores := cpu.Seconds() / wall.Seconds()
			b.ReportMetric(cores, "cores")
			b.ReportMetric(1000*cores/groups, "cpu-ms/s/group")
			b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/groups/1024, "heap-KiB/group")
			b.ReportMetric(float64(runtime.NumGoroutine())/groups, "goroutines/group")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
