package logging

import (
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// Defaults of the repeat limit the library bridges use: the first
// DefaultRepeatBurst records of a kind in each DefaultRepeatWindow are
// logged, the rest only counted.
const (
	DefaultRepeatWindow = time.Minute
	DefaultRepeatBurst  = 1
)

// maxRepeatKeys bounds the kinds of record a Repeats remembers; past it the
// kinds whose window has ended are forgotten, and if none has, all are.
const maxRepeatKeys = 1024

// Repeats limits how often one kind of log record is written: a
// library that retries a dead peer three times a second, or clients
// failing to log in, must not flood the log. Within a window that starts
// with a kind's first record, the first burst records are let through and
// the rest counted; the first record let through after the window says how
// many were suppressed. It is safe for concurrent use.
type Repeats struct {
	clock  clock.Clock
	window time.Duration
	burst  int

	mu struct {
		sync.Mutex
		seen map[string]*repeat
	}
}

type repeat struct {
	start      time.Time
	n          int // let through in this window
	suppressed int
}

// NewRepeats returns a limit of burst records of each kind per window
// (clk nil: the wall clock; window or burst below 1: the defaults).
func NewRepeats(clk clock.Clock, window time.Duration, burst int) *Repeats {
	if clk == nil {
		clk = clock.Real{}
	}
	if window <= 0 {
		window = DefaultRepeatWindow
	}
	if burst < 1 {
		burst = DefaultRepeatBurst
	}
	r := &Repeats{clock: clk, window: window, burst: burst}
	r.mu.seen = map[string]*repeat{}
	return r
}

// Allow reports whether a record of kind key may be written now and, when
// it may, how many records of that kind were suppressed before it.
func (r *Repeats) Allow(key string) (ok bool, suppressed int) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.mu.seen[key]
	if e == nil || now.Sub(e.start) >= r.window {
		if e != nil {
			suppressed = e.suppressed
		} else if len(r.mu.seen) >= maxRepeatKeys {
			r.forgetLocked(now)
		}
		r.mu.seen[key] = &repeat{start: now, n: 1}
		return true, suppressed
	}
	if e.n < r.burst {
		e.n++
		return true, 0
	}
	e.suppressed++
	return false, 0
}

func (r *Repeats) forgetLocked(now time.Time) {
	for k, e := range r.mu.seen {
		if now.Sub(e.start) >= r.window {
			delete(r.mu.seen, k)
		}
	}
	if len(r.mu.seen) >= maxRepeatKeys {
		clear(r.mu.seen)
	}
}
