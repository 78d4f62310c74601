package procs

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestNextNarrowsOnlyAfterSettleCalmIntervals(t *testing.T) {
	p := DefaultPolicy(4)
	s := p.Start()
	for i := 1; i < p.Settle; i++ {
		s = p.Next(s, 0.2)
		if s.Procs != 4 {
			t.Fatalf("after %d calm intervals: %d procs, want 4 until %d", i, s.Procs, p.Settle)
		}
	}
	// A busy interval resets the count.
	s = p.Next(s, 0.9)
	for i := 1; i < p.Settle; i++ {
		s = p.Next(s, 0.2)
	}
	if s.Procs != 4 {
		t.Fatalf("a busy interval did not restart the count: %d procs", s.Procs)
	}
	s = p.Next(s, 0.2)
	if s.Procs != 1 {
		t.Fatalf("after %d calm intervals: %d procs, want 1", p.Settle, s.Procs)
	}
}

func TestNextWidensAtOnceAndHolds(t *testing.T) {
	p := DefaultPolicy(2)
	s := State{Procs: 1}
	if s = p.Next(s, 0.6); s.Procs != 1 {
		t.Fatalf("use 0.6 under widen %.2f widened to %d", p.Widen, s.Procs)
	}
	if s = p.Next(s, 0.8); s.Procs != 2 {
		t.Fatalf("use 0.8 over widen %.2f: %d procs, want 2", p.Widen, s.Procs)
	}
	// Held wide for Hold intervals whatever the use, then Settle more.
	for i := 0; i < p.Hold+p.Settle-1; i++ {
		if s = p.Next(s, 0.1); s.Procs != 2 {
			t.Fatalf("narrowed %d intervals after widening; hold %d + settle %d", i+1, p.Hold, p.Settle)
		}
	}
	if s = p.Next(s, 0.1); s.Procs != 1 {
		t.Fatalf("still %d procs after hold and settle", s.Procs)
	}
}

func TestNextWithOneProcessorNeverChanges(t *testing.T) {
	p := DefaultPolicy(1)
	s := p.Start()
	for _, u := range []float64{0, 0.9, 5, 0} {
		if s = p.Next(s, u); s.Procs != 1 {
			t.Fatalf("max 1, use %.1f: %d procs", u, s.Procs)
		}
	}
}

func TestValidateRefusesPoliciesThatCannotWork(t *testing.T) {
	for _, p := range []Policy{
		{Max: 0, Narrow: 0.5, Widen: 0.7, Settle: 1},
		{Max: 2, Narrow: 0.5, Widen: 1.2, Settle: 1}, // one processor saturates first
		{Max: 2, Narrow: 2, Widen: 0.7, Settle: 1},
		{Max: 2, Narrow: 0.5, Widen: 0.7, Settle: 0},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := DefaultPolicy(8).Validate(); err != nil {
		t.Fatal(err)
	}
}

// fakeProcess is a process whose CPU use per second is set by the test
// and whose count Run sets.
type fakeProcess struct {
	mu    sync.Mutex
	rate  float64 // cores
	cpu   time.Duration
	at    time.Time
	procs int
	log   []Change
}

func (f *fakeProcess) CPU() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if !f.at.IsZero() {
		f.cpu += time.Duration(f.rate * float64(now.Sub(f.at)))
	}
	f.at = now
	return f.cpu, nil
}

func (f *fakeProcess) setRate(r float64) {
	f.CPU() // account the time so far at the old rate
	f.mu.Lock()
	f.rate = r
	f.mu.Unlock()
}

func (f *fakeProcess) get() int { f.mu.Lock(); defer f.mu.Unlock(); return f.procs }

func TestRunFollowsTheLoadAndRestoresMaxOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeProcess{procs: 2, rate: 0.3}
		p := DefaultPolicy(2)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, p, Driver{
				CPU:      f.CPU,
				Set:      func(n int) { f.mu.Lock(); f.procs = n; f.mu.Unlock() },
				Interval: 250 * time.Millisecond,
				Changed:  func(c Change) { f.mu.Lock(); f.log = append(f.log, c); f.mu.Unlock() },
			})
		}()
		// Everyday load: narrowed after Settle intervals.
		time.Sleep(time.Duration(p.Settle)*250*time.Millisecond + time.Millisecond) // lint:sleep-ok synctest: advances the bubble's fake clock
		synctest.Wait()
		if got := f.get(); got != 1 {
			t.Fatalf("at 0.3 cores for %d intervals: %d procs, want 1", p.Settle, got)
		}
		// A burst: widened within one interval.
		f.setRate(0.95)
		time.Sleep(250 * time.Millisecond) // lint:sleep-ok synctest: advances the bubble's fake clock
		synctest.Wait()
		if got := f.get(); got != 2 {
			t.Fatalf("one interval at 0.95 cores: %d procs, want 2", got)
		}
		// Narrow again, then stop: Run leaves Max.
		f.setRate(0.1)
		time.Sleep(time.Duration(p.Hold+p.Settle+1) * 250 * time.Millisecond) // lint:sleep-ok synctest: advances the bubble's fake clock
		synctest.Wait()
		if got := f.get(); got != 1 {
			t.Fatalf("calm again after the hold: %d procs, want 1", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := f.get(); got != 2 {
			t.Fatalf("after Run ended: %d procs, want max 2", got)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.log) != 3 || f.log[0].To != 1 || f.log[1].To != 2 || f.log[2].To != 1 {
			t.Fatalf("changes %+v, want narrow, widen, narrow", f.log)
		}
	})
}

func TestSelfCPUGrows(t *testing.T) {
	a, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i
	}
	_ = x
	b, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	if b <= a {
		t.Fatalf("CPU time %v then %v after a busy loop", a, b)
	}
}
