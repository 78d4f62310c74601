package sequenced

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/sequencer"
)

// Timing of a route.
const (
	// routeIdle: a route with nothing outstanding for this long retires.
	routeIdle = time.Minute
	// backoffMin and backoffMax bound the wait before a batch is sent
	// again after a failure (doubling per consecutive failure). The cap is
	// short: while a group elects a new leader, the access node asks
	// around the voters, and each wait adds to its publishers' stall.
	backoffMin = 10 * time.Millisecond
	backoffMax = 100 * time.Millisecond
	// holdMax: a route held this long (the move is slow, or the old home
	// failed it and was not asked yet) asks the old home every backoffMax
	// instead of every holdAsk.
	holdMax = 5 * time.Second
	// holdAsk is how often a held route asks the old home again: it
	// answers "moving" while the move runs and names the new home once
	// it switched, which may be before this node's metadata copy learns
	// the new record.
	holdAsk = 10 * time.Millisecond
)

// errNoLink: the target is another node and its link is not connected.
var errNoLink = errors.New("sequenced: no connected link to the home")

// item is one publish outstanding at the access node.
type item struct {
	pub   sequencer.Publish
	acks  []Acker // the PUBACK/PUBREC slots waiting for it (a retransmission adds one)
	start time.Time
	sent  uint64 // the stream it was last sent in (0: not sent in any)
	batch uint64 // its batch number in that stream
	done  bool   // acknowledged or dropped
}

func (it *item) size() int {
	return 32 + len(it.pub.Topic) + len(it.pub.Message) + len(it.pub.Key.Client)
}

// keyID is a publish's (client id, packet id).
type keyID struct {
	client string
	pid    uint16
}

// route is the access node's sender for one group: a queue of
// outstanding publishes, in the order they arrived, sent to the group's
// home in batches of one stream, several batches in flight. When a batch
// fails (the home is gone, another replica leads, the link broke) the
// route starts a new stream and sends every publish not yet acknowledged
// again, in order, to the next candidate; publishes that committed are
// recognised by their keys.
type route struct {
	// immutable after newRoute
	id   string
	rule fsm.Rule // the rule that mapped the first publish here (to create the group)
	r    *Router
	wake chan struct{} // cap 1: something to send, or a batch answered

	mu struct {
		sync.Mutex
		q           []*item // outstanding, oldest first; a done prefix is cut off
		unsent      int     // q[unsent:] are not sent in the current stream
		outstanding int     // items of q not done
		keys        map[keyID]*item
		stream      uint64 // 0: start a new one with the next batch
		n           uint64 // the last batch number sent in the stream
		requests    int    // batches in flight
		room        chan struct{}
		target      string   // the node batches go to
		epoch       uint64   // the record's epoch when target was chosen from it
		voters      []string // the record's voters: candidates when the target fails
		failures    int      // consecutive failures, for the backoff
		hold        time.Time
		retired     bool
		// held: the group is moving (its home answered StatusMoving):
		// nothing is sent until the record's epoch passes heldEpoch, or
		// for holdAsk (hold), after which the old home is asked again.
		// heldSince is when the hold began.
		held      bool
		heldEpoch uint64
		heldSince time.Time
		// pending: a batch of the current stream was answered "not
		// submitted" ahead of earlier batches still in flight (answers
		// may come out of order). The restart waits for those answers,
		// which decide their QoS 0 publishes (committed, or of unknown
		// outcome and dropped); nothing is sent meanwhile.
		pending *pendingRestart
	}
}

// pendingRestart is a restart deferred until the current stream's earlier
// batches are answered: the answer that called for it.
type pendingRestart struct {
	target string
	resp   response
}

func newRoute(r *Router, id string, rule fsm.Rule) *route {
	rt := &route{id: id, rule: rule, r: r, wake: make(chan struct{}, 1)}
	rt.mu.keys = map[keyID]*item{}
	rt.mu.room = make(chan struct{})
	return rt
}

func (rt *route) poke() {
	select {
	case rt.wake <- struct{}{}:
	default:
	}
}

// add queues it; false if the route retired first. A publish whose key is
// outstanding already (the client sent it again, after reconnecting) joins
// that publish instead: one message, acknowledged to both.
func (rt *route) add(it *item) bool {
	m := rt.r.metrics
	rt.mu.Lock()
	for {
		if rt.mu.retired {
			rt.mu.Unlock()
			return false
		}
		if k := it.pub.Key; k.Valid() {
			if old := rt.mu.keys[keyID{k.Client, k.PacketID}]; old != nil && !old.done {
				old.acks = append(old.acks, it.acks...)
				rt.mu.Unlock()
				return true
			}
		}
		if rt.mu.outstanding < rt.r.cfg.Inflight {
			break
		}
		reason := DropInflightFull
		if rt.mu.held {
			reason = DropHeldFull
		}
		if it.pub.QoS == 0 || len(it.acks) == 0 {
			rt.mu.Unlock()
			m.dropped.WithLabelValues(reason).Inc()
			return true
		}
		room := rt.mu.room
		rt.mu.Unlock()
		if !rt.waitRoom(room) {
			m.dropped.WithLabelValues(reason).Inc()
			ackAll(it.acks, packet.QuotaExceeded)
			return true
		}
		rt.mu.Lock()
	}
	rt.mu.q = append(rt.mu.q, it)
	rt.mu.outstanding++
	if k := it.pub.Key; k.Valid() {
		rt.mu.keys[keyID{k.Client, k.PacketID}] = it
	}
	rt.mu.Unlock()
	m.outstanding.Inc()
	rt.poke()
	return true
}

// waitRoom waits for items to leave the queue, up to WaitTimeout.
func (rt *route) waitRoom(room <-chan struct{}) bool {
	t := rt.r.clock.NewTimer(rt.r.cfg.WaitTimeout)
	defer t.Stop()
	select {
	case <-room:
		return true
	case <-t.C():
	case <-rt.r.group.Context().Done():
	}
	return false
}

// retire marks the route retired if nothing is outstanding; r.mu is held.
func (rt *route) retire() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.mu.outstanding > 0 || rt.mu.requests > 0 {
		return false
	}
	rt.mu.retired = true
	return true
}

// run is the route's sender.
func (rt *route) run(ctx context.Context) {
	clk := rt.r.clock
	timer := clk.NewTimer(routeIdle)
	defer timer.Stop()
	ready := rt.r.cfg.Meta.CaughtUp() // nil once it fired
	for {
		metaCh := rt.r.cfg.Meta.Changed()
		wait, idle := rt.step(ctx)
		switch {
		case idle:
			timer.Reset(routeIdle)
		case wait > 0:
			timer.Reset(wait)
		default:
			timer.Reset(time.Hour)
		}
		select {
		case <-ctx.Done():
			return
		case <-rt.wake:
		case <-metaCh:
		case <-ready:
			ready = nil
		case <-timer.C():
			if idle && rt.r.retire(rt) {
				return
			}
		}
	}
}

// step sends what it may: it resolves the target from the group's record
// (creating the group on its first publish), then sends batches of
// unsent publishes while fewer than maxRequests are in flight. It returns
// how long to wait before the next attempt (0: until woken), and whether
// the route is idle.
func (rt *route) step(ctx context.Context) (wait time.Duration, idle bool) {
	rt.mu.Lock()
	if rt.mu.outstanding == 0 && rt.mu.requests == 0 {
		rt.mu.Unlock()
		return 0, true
	}
	select {
	case <-rt.r.cfg.Meta.CaughtUp():
	default:
		// This node's metadata copy has not caught up since it started:
		// its record may name a home the group left while the node was
		// down (this node, even). Hold the publishes, as for a group
		// whose record is not known yet, until it caught up (run wakes).
		rt.mu.Unlock()
		return 0, false
	}
	now := rt.r.clock.Now()
	if hold := rt.mu.hold; now.Before(hold) {
		if !rt.mu.held {
			rt.mu.Unlock()
			return hold.Sub(now), false
		}
		// Held for a move: the record's new epoch ends the wait at once.
		epoch := rt.mu.heldEpoch
		rt.mu.Unlock()
		if rec, ok := rt.r.cfg.Meta.State().Group(rt.id); !ok || rec.Epoch <= epoch {
			return hold.Sub(now), false
		}
		rt.mu.Lock()
		rt.releaseLocked(now)
	}
	rt.mu.Unlock()

	rec, ok := rt.r.cfg.Meta.State().Group(rt.id)
	if !ok {
		var err error
		if rec, err = rt.r.create(ctx, rt.id, rt.rule); err != nil {
			return rt.createFailed(err), false
		}
	}

	var failed []Acker
	defer func() { ackAll(failed, packet.ImplementationSpecificError) }()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rec.Epoch != rt.mu.epoch {
		if rec.Home != rt.mu.target && rt.mu.stream != 0 {
			// The group moved (or failed over) and no answer told this
			// route yet: the new home never saw the current stream's
			// first batches and would wait for them (turnTimeout).
			// Everything not acknowledged goes there again in a new
			// stream; what committed is recognised by its key.
			rt.newStreamLocked()
		}
		rt.mu.target, rt.mu.epoch = rec.Home, rec.Epoch
	}
	rt.mu.voters = rec.Voters
	for rt.mu.requests < maxRequests && rt.mu.pending == nil {
		batch := rt.batchLocked()
		if len(batch) == 0 {
			break
		}
		if rt.mu.stream == 0 {
			rt.mu.stream, rt.mu.n = rt.r.stamps.Stamp(now), 0
		}
		rt.mu.n++
		pubs := make([]sequencer.Publish, len(batch))
		for i, it := range batch {
			it.sent, it.batch = rt.mu.stream, rt.mu.n
			pubs[i] = it.pub
		}
		cmd, err := sequencer.EncodeCommand(sequencer.PublishCommand(pubs...))
		if err != nil {
			// Not expected: the broker validated topics and the packet id.
			rt.r.log.Error("sequenced: encoding a batch", "group", rt.id, "err", err)
			rt.mu.n-- // not sent: the stream's next batch takes its number
			failed = append(failed, rt.finishLocked(batch, DropRefused)...)
			continue
		}
		req := request{Group: rt.id, Epoch: rt.mu.epoch, Stream: rt.mu.stream, N: rt.mu.n, Cmd: cmd}
		target := rt.mu.target
		rt.mu.requests++
		if !rt.r.group.Go(func(ctx context.Context) {
			resp, err := rt.r.call(ctx, target, req)
			rt.complete(req.Stream, target, batch, resp, err)
			rt.poke()
		}) {
			rt.mu.requests--
			return 0, false
		}
	}
	return 0, false
}

// batchLocked takes the next unsent publishes, within the batch limits.
func (rt *route) batchLocked() []*item {
	var batch []*item
	bytes := 0
	for rt.mu.unsent < len(rt.mu.q) && len(batch) < maxBatchItems {
		it := rt.mu.q[rt.mu.unsent]
		if !it.done {
			if len(batch) > 0 && bytes+it.size() > maxBatchBytes {
				break
			}
			batch = append(batch, it)
			bytes += it.size()
		}
		rt.mu.unsent++
	}
	return batch
}

// createFailed handles a failure to create the group: the outstanding
// publishes fail when the rule cannot be met (too few nodes), else the
// creation is tried again later.
func (rt *route) createFailed(err error) time.Duration {
	var failed []Acker
	defer func() { ackAll(failed, packet.UnspecifiedError) }()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if errors.Is(err, fsm.ErrTooFewNodes) || errors.Is(err, fsm.ErrInvalid) {
		rt.r.log.Warn("sequenced: cannot create a placement group; failing its publishes", "group", rt.id, "err", err)
		var open []*item
		for _, it := range rt.mu.q {
			if !it.done {
				open = append(open, it)
			}
		}
		failed = rt.finishLocked(open, DropUnavailable)
	} else if errors.Is(err, errNotReady) {
		rt.r.log.Debug("sequenced: waiting for nodes to register before creating a group", "group", rt.id, "err", err)
	} else {
		rt.r.log.Warn("sequenced: creating a placement group failed; will retry", "group", rt.id, "err", err)
	}
	return rt.backoffLocked()
}

// backoffLocked counts a failure and returns the wait before the next
// attempt.
func (rt *route) backoffLocked() time.Duration {
	rt.mu.failures++
	d := backoffMin << min(rt.mu.failures-1, 10)
	d = min(d, backoffMax)
	rt.mu.hold = rt.r.clock.Now().Add(d)
	return d
}

// complete handles the answer to a batch of stream.
func (rt *route) complete(stream uint64, target string, batch []*item, resp response, err error) {
	m := rt.r.metrics
	now := rt.r.clock.Now()
	var acks, refused []Acker
	rt.mu.Lock()
	rt.mu.requests--
	switch {
	case err == nil && resp.Status == StatusOK && len(resp.Published) == len(batch):
		if rt.mu.held {
			rt.releaseLocked(now)
		}
		for i, it := range batch {
			if it.done {
				continue
			}
			it.done = true
			rt.mu.outstanding--
			acks = append(acks, it.acks...)
			m.commit.Observe(now.Sub(it.start).Seconds())
			if resp.Published[i].Duplicate {
				m.published.WithLabelValues("duplicate").Inc()
			} else {
				m.published.WithLabelValues("new").Inc()
			}
			m.outstanding.Dec()
		}
		rt.mu.failures = 0
	case err == nil && resp.Status == StatusMoving:
		// Nothing of this batch was submitted: its QoS 0 publishes are
		// kept (they are sent again with the rest), and the group's
		// publishes are held until the move is recorded.
		m.retries.WithLabelValues(resp.Status.String()).Inc()
		if stream == rt.mu.stream {
			rt.unsentFromLocked(stream, batch)
			rt.restartLocked(target, resp, err)
			rt.mu.target = target // the old home: asked again after the wait
			if !rt.mu.held {
				rt.mu.held, rt.mu.heldSince = true, now
			}
			rt.mu.heldEpoch, rt.mu.hold = rt.mu.epoch, now.Add(holdAsk)
			if now.Sub(rt.mu.heldSince) >= holdMax {
				rt.mu.hold = now.Add(backoffMax)
			}
		}
	case err == nil && resp.Status == StatusRefused:
		rt.r.log.Warn("sequenced: the group refused a batch", "group", rt.id, "reason", resp.Reason)
		refused = rt.finishLocked(batch, DropRefused)
	default:
		reason := "link"
		if err == nil {
			reason = resp.Status.String()
			if resp.Status == StatusOK {
				reason = "bad_response"
			}
		}
		m.retries.WithLabelValues(reason).Inc()
		if stream == rt.mu.stream {
			if rt.mu.held {
				rt.releaseLocked(now) // the old home named the new one, or is gone
			}
			if err == nil && notSubmitted(resp.Status) {
				rt.unsentFromLocked(stream, batch)
				if rt.sentInFlightLocked(stream) {
					rt.mu.pending = &pendingRestart{target: target, resp: resp}
					break
				}
			}
			rt.restartLocked(target, resp, err)
		}
	}
	if p := rt.mu.pending; p != nil && !rt.sentInFlightLocked(rt.mu.stream) {
		// The earlier batches are answered: restart as the deferred
		// answer said.
		rt.restartLocked(p.target, p.resp, nil)
	}
	rt.compactLocked()
	rt.mu.Unlock()
	ackAll(acks, packet.Success)
	ackAll(refused, packet.ImplementationSpecificError)
}

// notSubmitted reports whether a batch answered with status certainly
// entered no log: the home refused it before submitting it (no replica
// there yet or any more, not the leader, a stale or ended stream, a
// fence). The home then submits none of the stream's later batches
// either (they wait for this one's turn, or find the stream ended).
func notSubmitted(s Status) bool {
	switch s {
	case StatusNoReplica, StatusNotLeader, StatusStale, StatusMoving:
		return true
	}
	return false
}

// unsentFromLocked marks the publishes of batch and of the later batches
// of stream as not sent, after the home answered batch with a status
// that says it submitted none of them: the new stream carries them
// again, QoS 0 ones included, instead of dropping those as of unknown
// outcome. (A new group's first QoS 0 burst, reaching its home before the
// home's replica opened, was dropped that way.) stream is the current
// one, so batch's publishes were last sent in it.
func (rt *route) unsentFromLocked(stream uint64, batch []*item) {
	if len(batch) == 0 {
		return
	}
	from := batch[0].batch
	for _, it := range rt.mu.q {
		if !it.done && it.sent == stream && it.batch >= from {
			it.sent = 0
		}
	}
}

// sentInFlightLocked reports whether publishes sent in stream are still
// waiting for their batch's answer. Called after unsentFromLocked, these
// are the batches before the one answered.
func (rt *route) sentInFlightLocked(stream uint64) bool {
	for _, it := range rt.mu.q {
		if !it.done && it.sent != 0 && it.sent == stream {
			return true
		}
	}
	return false
}

// releaseLocked ends a hold.
func (rt *route) releaseLocked(now time.Time) {
	rt.mu.held = false
	rt.r.metrics.held.Observe(now.Sub(rt.mu.heldSince).Seconds())
	rt.mu.failures = 0
}

// restartLocked starts a new stream after a batch of the current one
// failed: every publish not yet acknowledged is sent again, in order, to
// the leader the failed node named or else the next voter; QoS 0
// publishes that were sent are dropped (they have no key to recognise a
// repeat by).
func (rt *route) restartLocked(target string, resp response, err error) {
	rt.newStreamLocked()
	next := ""
	if err == nil && resp.Status == StatusNotLeader && resp.Leader != "" && resp.Leader != target {
		next = resp.Leader
	} else if len(rt.mu.voters) > 0 {
		i := slices.Index(rt.mu.voters, target)
		next = rt.mu.voters[(i+1)%len(rt.mu.voters)]
	}
	if next != "" {
		rt.mu.target = next
	}
	rt.backoffLocked()
	rt.r.log.Debug("sequenced: sending again", "group", rt.id, "failed", target, "next", rt.mu.target,
		"status", resp.Status, "err", err)
}

// newStreamLocked makes the next batch start a new stream carrying every
// publish not yet acknowledged, in order; QoS 0 publishes that were sent
// are dropped (they have no key to recognise a repeat by).
func (rt *route) newStreamLocked() {
	rt.mu.stream, rt.mu.unsent, rt.mu.pending = 0, 0, nil
	var lost []*item
	for _, it := range rt.mu.q {
		if !it.done && it.sent != 0 && it.pub.QoS == 0 {
			lost = append(lost, it)
		}
	}
	rt.finishLocked(lost, DropFailover) // QoS 0: nothing to acknowledge
}

// finishLocked ends items that will not be committed, counted as dropped
// for reason; it returns their acknowledgement slots, for the caller to
// acknowledge (with an error code) once it released the lock.
func (rt *route) finishLocked(items []*item, reason string) []Acker {
	n := 0
	var acks []Acker
	for _, it := range items {
		if it.done {
			continue
		}
		it.done = true
		rt.mu.outstanding--
		n++
		acks = append(acks, it.acks...)
	}
	rt.r.metrics.dropped.WithLabelValues(reason).Add(float64(n))
	rt.r.metrics.outstanding.Sub(float64(n))
	rt.compactLocked()
	return acks
}

// compactLocked cuts the done prefix off the queue and wakes publishers
// waiting for room.
func (rt *route) compactLocked() {
	k := 0
	for k < len(rt.mu.q) && rt.mu.q[k].done {
		it := rt.mu.q[k]
		if key := it.pub.Key; key.Valid() {
			if id := (keyID{key.Client, key.PacketID}); rt.mu.keys[id] == it {
				delete(rt.mu.keys, id)
			}
		}
		k++
	}
	if k == 0 {
		return
	}
	clear(rt.mu.q[:k])
	rt.mu.q = rt.mu.q[k:]
	rt.mu.unsent = max(rt.mu.unsent-k, 0)
	if len(rt.mu.q) == 0 {
		rt.mu.q = nil
	}
	close(rt.mu.room)
	rt.mu.room = make(chan struct{})
}

// drop ends every outstanding publish without acknowledging it (the node
// is stopping).
func (rt *route) drop(reason string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.mu.retired = true
	var open []*item
	for _, it := range rt.mu.q {
		open = append(open, it)
	}
	rt.finishLocked(open, reason) // not acknowledged: the connections close with the node
	rt.mu.q = nil
	clear(rt.mu.keys)
}

func ackAll(acks []Acker, code packet.ReasonCode) {
	for _, a := range acks {
		a.Ack(code)
	}
}

// call sends a batch to target: this node's home side directly, another
// node's over its link.
func (r *Router) call(ctx context.Context, target string, req request) (response, error) {
	if target == r.id {
		return r.cfg.Home.serve(ctx, r.id, req), nil
	}
	if target == "" || r.cfg.Peers == nil || !r.cfg.Peers.Up(target) {
		return response{}, errNoLink
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body, err := r.cfg.Peers.Call(ctx, target, MethodPublish, appendRequest(nil, req))
	if err != nil {
		return response{}, err
	}
	return decodeResponse(body)
}
