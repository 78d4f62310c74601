package run

import (
	"context"
	"sync"
	"sync/atomic"
)

// Group is a set of goroutines with one owner: their context ends at Stop,
// and Wait returns once every one of them has returned.
type Group struct {
	// immutable after NewGroup
	ctx    context.Context
	cancel context.CancelFunc

	stopped atomic.Bool // read without the lock on hot paths (Stopped)
	wg      sync.WaitGroup
	mu      sync.Mutex // orders Go's Add before Stop's flag, so Wait sees every Add
}

// NewGroup returns a group whose context is a child of parent: it ends at
// Stop, or when parent ends.
func NewGroup(parent context.Context) *Group {
	g := &Group{}
	g.ctx, g.cancel = context.WithCancel(parent)
	return g
}

// Context is the group's context: it ends when the group stops (or its
// parent ends). Blocking calls made on the group's behalf take it.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs f on a new goroutine of the group, with the group's context,
// unless the group is stopping; it reports whether f was started.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.Lock()
	if g.stopped.Load() {
		g.mu.Unlock()
		return false
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		f(g.ctx)
	}()
	return true
}

// Stop ends the group's context and refuses new goroutines; it does not
// wait (see Wait), so the owner can close what its goroutines block on
// (listeners, links) in between. It reports whether this call stopped the
// group (false if it was stopped already).
func (g *Group) Stop() bool {
	g.mu.Lock()
	first := !g.stopped.Swap(true)
	g.mu.Unlock()
	g.cancel()
	return first
}

// Stopped reports whether Stop has been called.
func (g *Group) Stopped() bool { return g.stopped.Load() }

// Wait blocks until every goroutine the group started has returned. Call
// it after Stop, and not from one of the group's goroutines.
func (g *Group) Wait() { g.wg.Wait() }
