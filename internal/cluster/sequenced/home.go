package sequenced

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
)

// turnTimeout bounds how long a batch waits for its stream's previous
// batch to be submitted. Batches of a stream travel in order on one
// connection, so a missing predecessor was lost with a connection that
// broke (its access node starts a new stream) or refused by the peer
// layer's request limit.
const turnTimeout = 10 * time.Second

// outcomeWait bounds how long a batch whose caller gave up is still
// counted by a fence, waiting for its outcome: longer than a replicated
// leader keeps a command without a majority (its lease).
const outcomeWait = 5 * time.Second

// replicaWait bounds how long a batch waits for this node's replica of
// its group to open: a new group's first batches may come before this
// node's replica set has caught up with the record.
const replicaWait = 5 * time.Second

// Groups is this node's replicas as the home side needs them
// (*replicas.Set).
type Groups interface {
	Get(id string) *replicas.Replica
	// Await is Get, waiting up to max for the replica when this node's
	// metadata copy names the node a replica of the group or has no
	// record of it yet.
	Await(ctx context.Context, id string, max time.Duration) *replicas.Replica
	// HandingOver names the home this node's replica is about to hand a
	// new group's lead to, if it is.
	HandingOver(id string) (home string, ok bool)
}

var _ Groups = (*replicas.Set)(nil)

// Home is the home side of the publish path: it submits the batches access
// nodes send to the groups this node leads, each stream's batches in
// order, and answers each with its publishes' places once committed.
type Home struct {
	// immutable after NewHome
	groups  Groups
	clock   clock.Clock
	metrics *metrics

	mu struct {
		sync.Mutex
		streams map[streamKey]*stream
		fences  map[string]*fence // by group: see fence.go
		active  map[string]int    // by group: batches admitted whose outcome is not known yet
		idle    map[string][]chan struct{}
	}
}

// streamKey names the stream of one access node to one group.
type streamKey struct{ group, node string }

// stream is the home's side of one access node's stream to one group:
// the batch whose turn it is to be submitted, and the batches that arrived
// ahead of it.
type stream struct {
	id      uint64
	next    uint64                   // the batch number to submit next
	waiting map[uint64]chan struct{} // closed when that batch's turn comes, or the stream ends
	broken  bool                     // a batch gave up waiting: the rest of the stream is stale
}

// NewHome returns the home side over this node's replicas. Its metrics
// (the publish path's, shared by the Router built on it) go to reg.
func NewHome(groups Groups, clk clock.Clock, reg prometheus.Registerer) *Home {
	if clk == nil {
		clk = clock.Real{}
	}
	h := &Home{groups: groups, clock: clk, metrics: newMetrics(reg)}
	h.mu.streams = map[streamKey]*stream{}
	h.mu.fences = map[string]*fence{}
	h.mu.active = map[string]int{}
	h.mu.idle = map[string][]chan struct{}{}
	return h
}

// Serve answers a MethodPublish request from node.
func (h *Home) Serve(ctx context.Context, node string, body []byte) ([]byte, error) {
	req, err := decodeRequest(body)
	if err != nil {
		return nil, err
	}
	return appendResponse(nil, h.serve(ctx, node, req)), nil
}

// serve sequences one batch: it waits for its turn in its stream, submits
// it, releases the next batch's turn and waits for the outcome.
func (h *Home) serve(ctx context.Context, node string, req request) response {
	r := h.groups.Await(ctx, req.Group, replicaWait)
	if r == nil {
		h.metrics.served(StatusNoReplica)
		return response{Status: StatusNoReplica}
	}
	if home, ok := h.groups.HandingOver(req.Group); ok {
		// Not submitted here: the lead is about to move, which would
		// leave the batch's outcome unknown.
		h.metrics.served(StatusNotLeader)
		return response{Status: StatusNotLeader, Leader: home}
	}
	key := streamKey{req.Group, node}
	if !h.turn(ctx, key, req.Stream, req.N) {
		h.metrics.served(StatusStale)
		return response{Status: StatusStale}
	}
	if resp, ok := h.admit(req.Group); !ok {
		// Fenced for a migration: nothing of the stream is submitted
		// from here on (the access node restarts it elsewhere). The
		// stream ends here: were the fence lifted (the move failed)
		// before its next batch came, that batch would otherwise be
		// submitted ahead of this one's publishes, which the access
		// node sends again later.
		h.abandon(key, req.Stream)
		h.metrics.served(resp.Status)
		return resp
	}
	p, err := h.submit(ctx, r, req)
	if err != nil {
		// Not submitted: likewise, nothing after it in the stream may be.
		h.abandon(key, req.Stream)
		h.end(req.Group)
		resp := submitError(err)
		h.metrics.served(resp.Status)
		return resp
	}
	h.done(key, req.Stream, req.N)
	res, err := p.Wait(ctx)
	if err != nil {
		// The caller gave up, but the command may still be applied: a
		// fence counts it until its outcome is known (bounded, so that a
		// node stopping is never held up by a replica that cannot answer).
		t := h.clock.NewTimer(outcomeWait)
		select {
		case <-p.Done():
		case <-t.C():
		}
		t.Stop()
	}
	h.end(req.Group)
	switch {
	case err != nil:
		h.metrics.served(StatusUnknown)
		return response{Status: StatusUnknown}
	case res.Err != nil:
		h.metrics.served(StatusRefused)
		return response{Status: StatusRefused, Reason: res.Err.Error()}
	}
	h.metrics.served(StatusOK)
	return response{Status: StatusOK, Published: res.Publishes}
}

// submit submits an admitted batch. The fence count (admit) ends when
// its outcome is known, not when it is queued: a command taken off the
// queue may still be being applied.
func (h *Home) submit(ctx context.Context, r *replicas.Replica, req request) (*replication.Pending[sequencer.Result], error) {
	p, err := r.Rep.Submit(ctx, req.Cmd)
	if err != nil && errors.Is(err, replication.ErrNotLeader) && r.Rep.Leader().ID == "" {
		// An election is under way (the home failed): wait for its
		// outcome here rather than send the access node round the
		// voters with growing backoffs. If this replica wins, it takes
		// the batch at once.
		if h.awaitLeader(ctx, r) {
			if home, ok := h.groups.HandingOver(r.ID); ok {
				// Won a new group's first election: the lead goes to
				// the group's home (see serve).
				return nil, &replication.NotLeaderError{Group: replication.GroupID(r.ID), Leader: replication.Leader{ID: home}}
			}
			p, err = r.Rep.Submit(ctx, req.Cmd)
		}
	}
	return p, err
}

// Waiting for an election's outcome.
const (
	// leaderWait bounds the wait: a few election rounds at LAN timings.
	leaderWait = 2 * time.Second
	// leaderPoll is how often the replica is asked whether it knows a
	// leader (Leadership's one-slot channel belongs to the replica's
	// keeper).
	leaderPoll = 5 * time.Millisecond
)

// awaitLeader waits until r knows a leader (up to leaderWait); it reports
// whether r is that leader.
func (h *Home) awaitLeader(ctx context.Context, r *replicas.Replica) bool {
	t := h.clock.NewTimer(leaderPoll)
	defer t.Stop()
	deadline := h.clock.Now().Add(leaderWait)
	for h.clock.Now().Before(deadline) {
		select {
		case <-t.C():
		case <-ctx.Done():
			return false
		}
		if l := r.Rep.Leader(); l.ID != "" {
			return l.Local
		}
		t.Reset(leaderPoll)
	}
	return false
}

// submitError maps a failed Submit: nothing entered the log.
func submitError(err error) response {
	var nl *replication.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return response{Status: StatusNotLeader, Leader: nl.Leader.ID}
	case errors.Is(err, replication.ErrClosed), errors.Is(err, replication.ErrFailed):
		return response{Status: StatusNoReplica}
	}
	return response{Status: StatusStale} // the context ended before it was queued
}

// turn waits until batch n is the next of its stream to submit. It
// reports false when the batch is stale: its stream was replaced by a
// newer one, it comes again, or it waited longer than turnTimeout (the
// stream is then broken: its later batches are stale too).
func (h *Home) turn(ctx context.Context, key streamKey, id, n uint64) bool {
	h.mu.Lock()
	st := h.mu.streams[key]
	if st == nil || id > st.id {
		if st != nil {
			st.end()
		}
		st = &stream{id: id, next: 1, waiting: map[uint64]chan struct{}{}}
		h.mu.streams[key] = st
	}
	switch {
	case id < st.id || st.broken || n < st.next || st.waiting[n] != nil:
		h.mu.Unlock()
		return false
	case n == st.next:
		h.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	st.waiting[n] = ch
	h.mu.Unlock()
	t := h.clock.NewTimer(turnTimeout)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C():
	case <-ctx.Done():
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st.waiting[n] == ch {
		delete(st.waiting, n)
	}
	if h.mu.streams[key] == st && !st.broken && st.next == n {
		return true
	}
	if h.mu.streams[key] == st && st.next < n {
		// Gave up before its predecessor came: the stream cannot keep
		// its order any more.
		st.end()
	}
	return false
}

// done releases the turn of batch n, which was submitted (or failed to
// be).
func (h *Home) done(key streamKey, id, n uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.mu.streams[key]
	if st == nil || st.id != id || st.next != n {
		return
	}
	st.next++
	if ch, ok := st.waiting[st.next]; ok {
		delete(st.waiting, st.next)
		close(ch)
	}
}

// abandon ends stream id of key after one of its batches was not
// submitted: its later batches are stale, so that none of them is
// submitted ahead of the publishes of the one that was not (the access
// node sends those again, in order, in a new stream).
func (h *Home) abandon(key streamKey, id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.mu.streams[key]; st != nil && st.id == id {
		st.end()
	}
}

// end breaks the stream and wakes every waiting batch (they are stale).
func (st *stream) end() {
	st.broken = true
	for n, ch := range st.waiting {
		close(ch)
		delete(st.waiting, n)
	}
}
