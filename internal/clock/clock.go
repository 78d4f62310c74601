// Package clock owns Sextant's notion of time for shells that need timers:
// the node, sessions and listeners take a Clock instead of calling package time
// directly, so tests can run them in a testing/synctest bubble or against a
// manual clock. Pure cores never import this package: they take time as an
// input value (ticks or a time.Time argument).
package clock

import "time"

// Clock is the source of time and timers for a shell component.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer whose channel receives once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that components use.
type Timer interface {
	// C is nil for timers made by AfterFunc.
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the wall clock. Inside a testing/synctest bubble it follows the
// bubble's fake time, which is how most tests drive it.
type Real struct{}

var _ Clock = Real{}

func (Real) Now() time.Time { return time.Now() }

func (Real) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
