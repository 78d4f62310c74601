package sequenced

import (
	"context"
	"fmt"
	"time"
)

// Fences: the home side's part in a migration (internal/migration). While
// a group is fenced here, its batches are answered StatusMoving and
// nothing is submitted; after the switch the fence becomes a redirect,
// answered StatusNotLeader naming the new home, so access nodes whose
// metadata copy still names this node go there at once.

// redirectFor is how long a redirect stays: long enough for every access
// node's metadata copy to learn the new record.
const redirectFor = 30 * time.Second

// fence is one group's state here.
type fence struct {
	to       string
	redirect bool
	until    time.Time // a redirect's end
}

// Fence makes this home answer group's batches "moving" (to: the target,
// named in the answer) and waits until the outcome of every batch it took
// before is known (applied, or refused), so that the group's log no longer
// changes here. (The replica's queue length would not do: a batch taken
// off the queue may still be being applied.)
func (h *Home) Fence(ctx context.Context, group, to string) error {
	h.mu.Lock()
	h.mu.fences[group] = &fence{to: to}
	var idle chan struct{}
	if h.mu.active[group] > 0 {
		idle = make(chan struct{})
		h.mu.idle[group] = append(h.mu.idle[group], idle)
	}
	h.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("sequenced: fence %s: %w", group, ctx.Err())
		}
	}
	return nil
}

// Unfence ends group's fence: with redirect, batches are answered "not
// leader: to" for a while (the group moved to to); without, they are
// taken again (the migration failed before its switch).
func (h *Home) Unfence(group, to string, redirect bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !redirect {
		delete(h.mu.fences, group)
		return
	}
	h.mu.fences[group] = &fence{to: to, redirect: true, until: h.clock.Now().Add(redirectFor)}
}

// admit is the fence check of a batch for group: ok means it may be
// submitted (end must be called once its Submit returned); otherwise resp
// is the answer.
func (h *Home) admit(group string) (resp response, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.mu.fences[group]; f != nil {
		switch {
		case f.redirect && h.clock.Now().After(f.until):
			delete(h.mu.fences, group)
		case f.redirect:
			return response{Status: StatusNotLeader, Leader: f.to}, false
		default:
			return response{Status: StatusMoving, Leader: f.to}, false
		}
	}
	h.mu.active[group]++
	return response{}, true
}

// end counts out a batch admitted for group.
func (h *Home) end(group string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.active[group]--; h.mu.active[group] > 0 {
		return
	}
	delete(h.mu.active, group)
	for _, ch := range h.mu.idle[group] {
		close(ch)
	}
	delete(h.mu.idle, group)
}
