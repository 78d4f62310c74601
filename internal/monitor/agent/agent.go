package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/procstat"
	"github.com/sextantmq/sextant/internal/run"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("agent: invalid config")

// Counters are the node's cumulative traffic counters: bytes read and
// written on client and peer connections, messages received and sent (all
// traffic: clients and peer links, every topic mode).
type Counters struct {
	NetBytes      uint64
	MsgIn, MsgOut uint64
}

// Config wires an Agent. Node, Tracker and Send are required.
type Config struct {
	Node    string
	Tracker *monitor.Tracker
	// Send delivers an encoded report to the placement manager.
	Send func(ctx context.Context, report []byte) error
	// Interval between reports (default 5 s).
	Interval time.Duration
	// Capacity the load is a fraction of. Zero CPUs: the processors Go
	// may use (GOMAXPROCS, which follows a cgroup's CPU limit); zero
	// Memory: procstat.MemoryLimit; zero Network: not measured.
	Capacity monitor.Capacity
	// Coordinate returns the node's network coordinate (nil: none).
	Coordinate func() *coordinate.Coordinate
	// Counters returns the node's counters (nil: all zero).
	Counters func() Counters
	// Process reads the process's CPU time and memory (default
	// procstat.Read(0)).
	Process func() (procstat.Sample, error)
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Agent sends a node's monitoring reports.
type Agent struct {
	// immutable after New
	cfg         Config
	incarnation uint64

	sent, failed atomic.Uint64

	// owned by Run's goroutine
	seq  uint64
	prev monitor.Sample
}

// New checks cfg and returns an Agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if cfg.Node == "" || len(cfg.Node) > monitor.MaxNodeIDBytes || cfg.Tracker == nil || cfg.Send == nil {
		return nil, fmt.Errorf("%w: node (1 to %d bytes), tracker and send are required", ErrConfig, monitor.MaxNodeIDBytes)
	}
	if cfg.Interval < 0 || cfg.Capacity.CPUs < 0 || cfg.Capacity.Memory < 0 || cfg.Capacity.Network < 0 {
		return nil, fmt.Errorf("%w: negative interval or capacity", ErrConfig)
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Interval > monitor.MaxWindow {
		return nil, fmt.Errorf("%w: interval %v beyond %v", ErrConfig, cfg.Interval, monitor.MaxWindow)
	}
	if cfg.Capacity.CPUs == 0 {
		cfg.Capacity.CPUs = float64(runtime.GOMAXPROCS(0))
	}
	if cfg.Capacity.Memory == 0 {
		m, err := procstat.MemoryLimit()
		if err != nil {
			return nil, fmt.Errorf("%w: memory capacity: %w", ErrConfig, err)
		}
		cfg.Capacity.Memory = m
	}
	if cfg.Coordinate == nil {
		cfg.Coordinate = func() *coordinate.Coordinate { return nil }
	}
	if cfg.Counters == nil {
		cfg.Counters = func() Counters { return Counters{} }
	}
	if cfg.Process == nil {
		cfg.Process = func() (procstat.Sample, error) { return procstat.Read(0) }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Agent{cfg: cfg}
	now := cfg.Clock.Now()
	a.incarnation = uint64(now.UnixNano())
	a.prev = a.sample(now)
	return a, nil
}

// Stats returns the reports sent and those that could not be.
func (a *Agent) Stats() (sent, failed uint64) { return a.sent.Load(), a.failed.Load() }

// Run sends a report every interval until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	run.Every(ctx, a.cfg.Clock, a.cfg.Interval, a.cfg.Interval, func(ctx context.Context) {
		b, err := a.report(a.cfg.Clock.Now())
		if err == nil {
			err = a.cfg.Send(ctx, b)
		}
		if err != nil {
			a.failed.Add(1)
			a.cfg.Logger.Debug("monitoring report not sent", "err", err)
			return
		}
		a.sent.Add(1)
	})
}

// sample reads the counters; a process reading that fails leaves CPU and
// memory at the previous sample's (no activity), and is logged.
func (a *Agent) sample(now time.Time) monitor.Sample {
	c := a.cfg.Counters()
	s := monitor.Sample{At: now, NetBytes: c.NetBytes, MsgIn: c.MsgIn, MsgOut: c.MsgOut, CPU: a.prev.CPU, RSS: a.prev.RSS}
	if p, err := a.cfg.Process(); err != nil {
		a.cfg.Logger.Warn("monitoring: process figures unavailable", "err", err)
	} else {
		s.CPU, s.RSS = p.CPU, p.RSSKiB<<10
	}
	return s
}

// report builds and encodes the next report, covering the time since the
// last one.
func (a *Agent) report(now time.Time) ([]byte, error) {
	cur := a.sample(now)
	window := now.Sub(a.prev.At)
	if window <= 0 {
		window = a.cfg.Interval
	}
	window = min(window, monitor.MaxWindow)
	a.seq++
	r := monitor.Report{
		Node: a.cfg.Node, Incarnation: a.incarnation, Seq: a.seq, Window: window,
		Load:   monitor.Utilisation(a.prev, cur, a.cfg.Capacity),
		Topics: a.cfg.Tracker.Report(window),
	}
	if c := a.cfg.Coordinate(); c != nil && c.IsValid() && len(c.Vec) > 0 && len(c.Vec) <= monitor.MaxDims {
		r.Coord = c
	}
	if len(r.Topics) > monitor.MaxReportTopics { // the tracker's bound keeps under it; never send an invalid report
		r.Topics = r.Topics[:monitor.MaxReportTopics]
	}
	a.prev = cur
	return monitor.AppendReport(nil, &r)
}
