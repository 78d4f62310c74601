// Package procs owns how many OS threads run the process's Go code at once
// (GOMAXPROCS) while `sextant serve` runs, when the operator has not fixed
// it: one while the process uses little CPU, all it may use once it needs
// more.
//
// Why: at everyday rates a broker waits between messages, and each message
// that arrives while the process is idle wakes a thread. With more than one
// processor the runtime also wakes a second thread to look for work beside
// the first (and lets both wander between cores), so a message costs two
// wake-ups and often a migration, which on a quiet machine cost more than
// the message's own work (BENCHMARKS.md, "Threads at everyday rates"). With
// one processor the message costs one. Under load the process widens back
// within one interval, so saturated throughput is what it was.
//
// The package has a pure core (Policy.Next: utilisation in, next count
// out) and a driver (Run) that samples the process's CPU time and applies
// the decision. It must not be used by more than one caller in a process
// (GOMAXPROCS is process-wide), so only the serve command starts it; the
// composition root (internal/node) and in-process test clusters never do.
// It imports only the standard library.
package procs

import (
	"context"
	"fmt"
	"time"
)

// Policy decides the processor count from the process's CPU use. Use is
// in cores: CPU seconds spent per wall-clock second over one interval.
type Policy struct {
	// Max is the count when widened: what the runtime chose at start
	// (the machine's cores, or a container's CPU limit).
	Max int
	// Narrow: at Max, a use below this for Settle intervals in a row
	// narrows to one processor.
	Narrow float64
	// Widen: at one processor, a use above this widens to Max at once.
	// It sits well under one core so a rising load widens before the
	// single processor is saturated.
	Widen float64
	// Settle is how many calm intervals in a row narrowing needs, so a
	// load that dips for a moment keeps its processors.
	Settle int
	// Hold is how many intervals after widening narrowing is not
	// considered, so a load near the thresholds does not make the count
	// flap.
	Hold int
}

// DefaultPolicy is the policy for a process that may use max processors.
// Narrow (0.5 of a core) is above what a node uses at 10,000 QoS 1
// messages a second with two processors (about 0.35), and Widen (0.7) is
// below a saturated single processor (1.0); at one processor the same load
// uses less than at two, so the gap between them is hysteresis too.
func DefaultPolicy(max int) Policy {
	return Policy{Max: max, Narrow: 0.5, Widen: 0.7, Settle: 4, Hold: 20}
}

// Validate reports a policy that cannot work.
func (p Policy) Validate() error {
	switch {
	case p.Max < 1:
		return fmt.Errorf("procs: max %d: at least 1", p.Max)
	case p.Narrow <= 0 || p.Widen <= 0 || p.Narrow >= float64(p.Max):
		return fmt.Errorf("procs: narrow %.2f and widen %.2f cores must be positive, narrow under max %d", p.Narrow, p.Widen, p.Max)
	case p.Widen >= 1:
		return fmt.Errorf("procs: widen %.2f cores: must be under one core, or one processor saturates before it widens", p.Widen)
	case p.Settle < 1 || p.Hold < 0:
		return fmt.Errorf("procs: settle %d (at least 1) and hold %d (at least 0)", p.Settle, p.Hold)
	}
	return nil
}

// State is what the policy remembers between intervals.
type State struct {
	Procs int // the current count
	calm  int // intervals in a row below Narrow, at Max
	hold  int // intervals left before narrowing may be considered
}

// Start is the state of a process running with Max processors.
func (p Policy) Start() State { return State{Procs: p.Max} }

// Next takes one interval's CPU use (cores) and returns the next state;
// its Procs is the count to run with.
func (p Policy) Next(s State, use float64) State {
	if p.Max <= 1 {
		return State{Procs: p.Max}
	}
	if s.Procs < p.Max {
		if use > p.Widen {
			return State{Procs: p.Max, hold: p.Hold}
		}
		return s
	}
	if s.hold > 0 {
		s.hold--
		return s
	}
	if use >= p.Narrow {
		s.calm = 0
		return s
	}
	s.calm++
	if s.calm >= p.Settle {
		return State{Procs: 1}
	}
	return s
}

// Change is one change of the count, reported to the driver's observer.
type Change struct {
	From, To int
	Use      float64 // the interval's use (cores) that decided it
}

// Driver is what Run needs from the process: its CPU time so far, and a
// way to set the count (runtime.GOMAXPROCS in production).
type Driver struct {
	CPU      func() (time.Duration, error)
	Set      func(n int)
	Interval time.Duration
	// Changed, if set, is called after each change (metrics, a log line).
	Changed func(Change)
}

// Run samples the CPU time every interval and applies the policy's
// decisions until ctx ends; then it restores Max, so whatever runs after
// it (a shutdown's drain) has every processor. A failing CPU reader ends it
// with the error, leaving Max in place.
func Run(ctx context.Context, p Policy, d Driver) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if d.Interval <= 0 || d.CPU == nil || d.Set == nil {
		return fmt.Errorf("procs: driver needs an interval, a CPU reader and a setter")
	}
	s := p.Start()
	defer func() {
		if s.Procs != p.Max {
			d.Set(p.Max)
		}
	}()
	last, err := d.CPU()
	if err != nil {
		return fmt.Errorf("procs: reading CPU time: %w", err)
	}
	lastAt := time.Now()
	t := time.NewTicker(d.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cpu, err := d.CPU()
		if err != nil {
			return fmt.Errorf("procs: reading CPU time: %w", err)
		}
		now := time.Now()
		wall := now.Sub(lastAt)
		if wall <= 0 {
			continue
		}
		use := float64(cpu-last) / float64(wall)
		last, lastAt = cpu, now
		next := p.Next(s, use)
		if next.Procs != s.Procs {
			d.Set(next.Procs)
			if d.Changed != nil {
				d.Changed(Change{From: s.Procs, To: next.Procs, Use: use})
			}
		}
		s = next
	}
}
