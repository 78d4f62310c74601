package delivery

import (
	"context"
	"time"
)

// poller polls one node for the feeds whose source it is: one long poll
// at a time, covering all of them, so a node holds one poll per source
// node however many groups it follows.
//
// Polling and delivering overlap: the poller hands what a poll brought to
// its deliverer goroutine and polls again from past those records while
// they are being delivered, so that a feed's rate is not the sum of a
// poll's round trip and the sessions' time. The hand-off holds at most
// queuedPolls answers (each at most defaultPollBytes): when the deliverer
// falls behind (sessions' queues full), the poller waits, and the backlog
// stays in the group's log, never in memory.
type poller struct {
	// immutable after creation
	f     *Feeds
	node  string
	wake  chan struct{} // cap 1
	queue chan []batch  // poller -> deliverer, cap queuedPolls; closed when the poller ends

	// under f.mu
	cancel context.CancelFunc // ends the poll in flight
}

// queuedPolls bounds the poll answers waiting for the deliverer (one more
// is being delivered, and the poller may hold one it cannot hand over).
const queuedPolls = 1

// batch is one group's records of one poll answer, to deliver in order
// from position from; next is the position after them.
type batch struct {
	fd         *feed
	from, next uint64
	recs       []record
}

func newPoller(f *Feeds, node string) *poller {
	return &poller{f: f, node: node, wake: make(chan struct{}, 1), queue: make(chan []batch, queuedPolls)}
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

// run polls until the poller has no feed left or the feeds close, and
// runs the poller's deliverer meanwhile.
func (p *poller) run(ctx context.Context) {
	done := make(chan struct{})
	go func() { // owned by run, which waits for it
		defer close(done)
		p.deliverAll(ctx)
	}()
	defer func() {
		close(p.queue)
		<-done
	}()
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
		if bs := p.accept(asked, resp); len(bs) > 0 {
			select {
			case p.queue <- bs:
			case <-ctx.Done():
				p.release(bs)
				return
			}
		}
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
		if fd.pending > 0 && fd.owner != p { // another poller delivers it (it just moved): soon done
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

// accept takes what a poll brought, group by group, and returns the
// batches to deliver. A group's records are taken only if the feed still
// expects them (it did not move to another poller that took them
// meanwhile), and the feed's poll position moves past them at once; the
// deliverer delivers them in the order taken, so each position is
// delivered once and in order.
func (p *poller) accept(asked map[string]uint64, resp pollResponse) []batch {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []batch
	for i := range resp.Groups {
		gr := &resp.Groups[i]
		from, ok := asked[gr.Group]
		if !ok {
			continue
		}
		fd := f.mu.feeds[gr.Group]
		if fd == nil || fd.source != p.node || (fd.pending > 0 && fd.owner != p) || fd.next != from {
			continue
		}
		if gr.Status != statusOK {
			f.failLocked(fd)
			continue
		}
		fd.fails = 0
		if gr.First > 0 {
			f.countLost(gr.Group, "feed", gr.From, gr.First)
		}
		if fd.next == 0 && fd.pending == 0 {
			fd.delivered = gr.From // the feed starts here
		}
		fd.next = gr.Next
		if len(gr.Records) == 0 && fd.pending == 0 {
			fd.delivered = gr.Next // nothing to deliver before: skip at once
			continue
		}
		fd.pending++
		fd.owner = p
		out = append(out, batch{fd: fd, from: gr.From, next: gr.Next, recs: gr.Records})
	}
	return out
}

// deliverAll delivers the batches the poller queues until it closes the
// queue; once ctx ends it releases them undelivered.
func (p *poller) deliverAll(ctx context.Context) {
	for bs := range p.queue {
		for i := range bs {
			if ctx.Err() != nil {
				p.release(bs[i:])
				break
			}
			p.deliver(&bs[i])
		}
	}
}

// deliver hands one batch to the sessions if its feed is still the one
// it was polled for and has delivered up to it (a feed that a replay
// started elsewhere, or that was closed and opened again, skips it).
func (p *poller) deliver(b *batch) {
	f := p.f
	f.mu.Lock()
	fd := b.fd
	ok := f.mu.feeds[fd.id] == fd && fd.owner == p && fd.delivered <= b.from
	if ok {
		if fd.delivered < b.from {
			// Positions between were skipped by the filters or lost to
			// retention (counted when polled): nothing to deliver there.
			fd.delivered = b.from
		}
		fd.delivering = true
	}
	f.mu.Unlock()
	if ok && len(b.recs) > 0 {
		f.deliver(fd.id, b.recs)
	}
	f.mu.Lock()
	if ok {
		fd.delivering = false
		fd.delivered = max(fd.delivered, b.next)
	}
	p.doneLocked(fd)
	f.mu.Unlock()
}

// release gives up batches undelivered (the feeds are closing).
func (p *poller) release(bs []batch) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range bs {
		p.doneLocked(bs[i].fd)
	}
}

// doneLocked ends one of this poller's batches of fd; f.mu is held.
func (p *poller) doneLocked(fd *feed) {
	if fd.owner != p {
		return
	}
	if fd.pending--; fd.pending <= 0 {
		fd.pending, fd.owner = 0, nil
	}
}
