// Package clocktest provides a manually advanced clock.Clock for tests that
// cannot run inside a testing/synctest bubble (for example because they use
// real sockets). It is imported only by tests.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// Manual is a clock that moves only when Advance is called. Timers whose
// deadline is reached fire during Advance, in deadline order.
type Manual struct {
	mu struct {
		sync.Mutex
		now    time.Time
		timers []*manualTimer
	}
}

var _ clock.Clock = (*Manual)(nil)

// New returns a manual clock reading start.
func New(start time.Time) *Manual {
	m := &Manual{}
	m.mu.now = start
	return m
}

func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.now
}

func (m *Manual) AfterFunc(d time.Duration, f func()) clock.Timer {
	return m.add(d, f, nil)
}

func (m *Manual) NewTimer(d time.Duration) clock.Timer {
	return m.add(d, nil, make(chan time.Time, 1))
}

func (m *Manual) add(d time.Duration, f func(), c chan time.Time) *manualTimer {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &manualTimer{m: m, f: f, c: c, at: m.mu.now.Add(d), active: true}
	m.mu.timers = append(m.mu.timers, t)
	return t
}

// Advance moves the clock forward by d and fires every timer that is due.
// AfterFunc callbacks run synchronously, outside the clock's lock.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	m.mu.now = m.mu.now.Add(d)
	now := m.mu.now
	var due, keep []*manualTimer
	for _, t := range m.mu.timers {
		if t.active && !t.at.After(now) {
			t.active = false
			due = append(due, t)
		} else if t.active {
			keep = append(keep, t)
		}
	}
	m.mu.timers = keep
	m.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		if t.f != nil {
			t.f()
		} else {
			select {
			case t.c <- now:
			default:
			}
		}
	}
}

type manualTimer struct {
	m      *Manual
	f      func()
	c      chan time.Time
	at     time.Time // guarded by m.mu
	active bool      // guarded by m.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	was := t.active
	t.at = t.m.mu.now.Add(d)
	if !was {
		t.active = true
		t.m.mu.timers = append(t.m.mu.timers, t)
	}
	return was
}
