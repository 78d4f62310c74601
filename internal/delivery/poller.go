package delivery

import (
	"context"
	"time"
)

// poller polls one node for the feeds whose source it is: one long poll
// at a time, covering all of them, so a node holds one poll per source
// node however many groups it follows.
type poller struct {
	// immutable after creation
	f    *Feeds
	node string
	wake chan struct{} // cap 1

	// under f.mu
	cancel context.CancelFunc // ends the poll in flight
}

// interruptLocked ends the poll in flight (its feeds changed) and wakes the
// poller; f.mu is held.
func (p *poller) interruptLocked() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run polls until the poller has no feed left or the feeds close.
func (p *poller) run(ctx context.Context) {
	f := p.f
	timer := f.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		req, asked, wait, ok := p.request()
		if !ok {
			return
		}
		if len(req.Groups) == 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-timer.C():
			}
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		f.mu.Lock()
		p.cancel = cancel
		f.mu.Unlock()
		resp, err := f.call(cctx, p.node, req)
		interrupted := cctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !interrupted {
				f.metrics.polls.WithLabelValues("failed").Inc()
				f.log.Debug("delivery: poll failed", "node", p.node, "err", err)
				p.failed(asked)
			}
			continue
		}
		f.metrics.polls.WithLabelValues("ok").Inc()
		p.apply(asked, resp)
	}
}

// request builds the next poll: every feed whose source is this poller's
// node, not held back and not being delivered, from its next position.
// ok is false when the poller has no feed left (it then retires); wait is
// how long until a held feed may be polled again.
func (p *poller) request() (req pollRequest, asked map[string]uint64, wait time.Duration, ok bool) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	wait = time.Hour
	asked = map[string]uint64{}
	any := false
	for _, fd := range f.mu.feeds {
		if fd.source != p.node {
			continue
		}
		any = true
		if fd.source != fd.home && fd.fails == 0 && f.up(fd.home) {
			// The home answers again: back to it.
			f.moveLocked(fd, fd.home)
			continue
		}
		if fd.busy { // another poller delivers it (it just moved): soon done
			wait = min(wait, backoffMin)
			continue
		}
		if now.Before(fd.hold) {
			wait = min(wait, fd.hold.Sub(now))
			continue
		}
		asked[fd.id] = fd.next
		g := pollGroup{Group: fd.id, From: fd.next, Filters: fd.filters}
		if fd.next == 0 {
			g.Since = fd.since.UnixNano()
		}
		req.Groups = append(req.Groups, g)
	}
	if !any {
		if f.mu.pollers[p.node] == p {
			delete(f.mu.pollers, p.node)
		}
		return req, nil, 0, false
	}
	req.Poll, req.Wait = f.polls.Add(1), f.cfg.PollWait
	return req, asked, wait, true
}

// failed moves the feeds of a failed poll on to their next voter.
func (p *poller) failed(asked map[string]uint64) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range asked {
		if fd := f.mu.feeds[id]; fd != nil && fd.source == p.node {
			f.failLocked(fd)
		}
	}
}

// apply delivers what a poll brought, group by group. A group's records
// are delivered only if the feed still expects them (it did not move to
// another poller that delivered them meanwhile), and the feed's position
// moves past them before they are delivered, so they are delivered once
// and in order.
func (p *poller) apply(asked map[string]uint64, resp pollResponse) {
	f := p.f
	for i := range resp.Groups {
		gr := &resp.Groups[i]
		from, ok := asked[gr.Group]
		if !ok {
			continue
		}
		f.mu.Lock()
		fd := f.mu.feeds[gr.Group]
		if fd == nil || fd.source != p.node || fd.busy || fd.next != from {
			f.mu.Unlock()
			continue
		}
		if gr.Status != statusOK {
			f.failLocked(fd)
			f.mu.Unlock()
			continue
		}
		fd.fails = 0
		if gr.First > 0 {
			f.countLost(gr.Group, "feed", gr.From, gr.First)
		}
		fd.next = gr.Next
		if len(gr.Records) == 0 {
			f.mu.Unlock()
			continue
		}
		fd.busy = true
		f.mu.Unlock()
		f.deliver(gr.Group, gr.Records)
		f.mu.Lock()
		fd.busy = false
		f.mu.Unlock()
	}
}
