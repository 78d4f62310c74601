package delivery

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/topic"
)

// Replays: a session's history of one group, read from a replica from a
// position, then joined to the live feed. The session's cursor on the
// group (session/cursor.go) is paused while the replay runs: live
// deliveries of the group skip the session; the replay delivers every
// record past the cursor that the session's subscriptions want, in order;
// once it has read as far as the feed has delivered (and no delivery of the
// feed is under way), it resumes the cursor under the feeds' lock, so the
// feed's next record is the session's next: no gap, no duplicate.
//
// Two things start one: a SUBSCRIBE with sx-from (its filters are "fresh":
// their history is delivered from where sx-from says, records of other,
// older subscriptions from where live deliveries stopped), and a
// persistent session's connection with paused cursors (its backlog, from
// each cursor on).

// maxReplays bounds the replays running at once on a node; more wait.
const maxReplays = 256

// retainedTimeout bounds fetching a new subscription's retained messages.
const retainedTimeout = 30 * time.Second

type replayKey struct {
	s     *session.Session
	group string
}

// replay is one session's replay of one group.
type replay struct {
	key replayKey
	// prev is the session's cursor when the replay began: live deliveries
	// took records up to it for the subscriptions the session had.
	prev uint64
	// backlog: a persistent session's replay from its paused cursor
	// (Attached): records are replayed from prev+1 even when prev is 0
	// (the session paused on a group's first record while offline).
	backlog bool
	// pending are the sx-from requests not yet resolved; under f.mu.
	pending []session.SubRequest
	// fresh are the sx-from filters, with the index floors of their
	// topics; owned by the replay's goroutine.
	fresh map[string]floors
}

// floors say from which index a fresh filter's topics are replayed.
type floors struct {
	start  uint64 // the position its replay starts at
	floor  uint64
	topics map[string]uint64
}

func (fl floors) wants(topic string, seq, index uint64) bool {
	if seq < fl.start {
		return false
	}
	if f, ok := fl.topics[topic]; ok {
		return index >= f
	}
	return index >= fl.floor
}

// Subscribing implements broker.Replays: the groups whose history an
// sx-from subscription asks for have their live deliveries to s paused
// before the subscription takes effect.
func (f *Feeds) Subscribing(s *session.Session, reqs []session.SubRequest) {
	var groups []fsm.Group
	for _, r := range reqs {
		if r.From.Kind == session.FromNone {
			continue
		}
		if _, _, shared, _ := topic.ParseShared(r.Filter); shared {
			continue
		}
		if groups == nil {
			groups = f.cfg.Meta.State().Groups()
		}
		for _, g := range groups {
			if !topic.Overlap(r.Filter, g.Rule) {
				continue
			}
			prev := s.Pause(g.ID, 0)
			f.mu.Lock()
			rp := f.mu.replays[replayKey{s, g.ID}]
			if rp == nil {
				rp = &replay{key: replayKey{s, g.ID}, prev: prev}
				f.mu.replays[rp.key] = rp
				f.mu.idle[rp.key] = true // started by Subscribed
			}
			rp.pending = append(rp.pending, r)
			f.mu.Unlock()
		}
	}
}

// Subscribed implements broker.Replays: replays asked for start, and the
// latest retained messages of matching sequenced topics are sent (those
// of the sx-from filters by their replays).
func (f *Feeds) Subscribed(s *session.Session, reqs []session.SubRequest, codes []packet.ReasonCode, existed []bool) {
	var groups []fsm.Group
	for i, r := range reqs {
		if _, _, shared, _ := topic.ParseShared(r.Filter); shared || codes[i].IsError() {
			continue
		}
		retained := r.Opts.RetainHandling == 0 || (r.Opts.RetainHandling == 1 && !existed[i])
		if !retained || r.From.Kind != session.FromNone {
			continue
		}
		if groups == nil {
			groups = f.cfg.Meta.State().Groups()
		}
		for _, g := range groups {
			if topic.Overlap(r.Filter, g.Rule) {
				f.group.Go(func(ctx context.Context) { f.sendRetained(ctx, s, g, r) })
			}
		}
	}
	f.mu.Lock()
	var start []*replay
	for key := range f.mu.idle {
		if key.s == s {
			start = append(start, f.mu.replays[key])
			delete(f.mu.idle, key)
		}
	}
	f.mu.Unlock()
	for _, rp := range start {
		f.startReplay(rp)
	}
}

// Attached implements broker.Replays: a session connected with paused
// cursors gets its backlog, each group's from its cursor on.
func (f *Feeds) Attached(s *session.Session) {
	for g, c := range s.Cursors() {
		if !c.Paused {
			continue
		}
		f.mu.Lock()
		key := replayKey{s, g}
		if f.mu.replays[key] != nil {
			f.mu.Unlock()
			continue
		}
		rp := &replay{key: key, prev: c.Seq, backlog: true}
		f.mu.replays[key] = rp
		f.mu.Unlock()
		f.startReplay(rp)
	}
}

func (f *Feeds) startReplay(rp *replay) {
	f.metrics.replays.Inc()
	if !f.group.Go(func(ctx context.Context) { f.runReplay(ctx, rp) }) {
		f.endReplay(rp)
	}
}

// endReplay forgets rp (the session is gone, or the node stops).
func (f *Feeds) endReplay(rp *replay) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.replays[rp.key] == rp {
		delete(f.mu.replays, rp.key)
		delete(f.mu.idle, rp.key)
	}
}

// runReplay delivers the group's records to the session from where the
// replay starts until it joins the feed, resolving sx-from requests first
// (and any that arrive meanwhile).
func (f *Feeds) runReplay(ctx context.Context, rp *replay) {
	select {
	case f.replaySlots <- struct{}{}:
		defer func() { <-f.replaySlots }()
	case <-ctx.Done():
		f.endReplay(rp)
		return
	}
	s, g := rp.key.s, rp.key.group
	src := &source{f: f, group: g}
	rp.fresh = map[string]floors{}
	// oldFrom is where records are replayed for the subscriptions that are
	// not fresh: past what live deliveries took (0: nothing to replay
	// for them).
	oldFrom := uint64(0)
	if rp.prev > 0 || rp.backlog {
		oldFrom = rp.prev + 1
	}
	next := oldFrom
	wait := f.clock.NewTimer(time.Hour)
	defer wait.Stop()
	for ctx.Err() == nil {
		if reqs := f.takePending(rp); len(reqs) > 0 {
			// Records before next were replayed for the filters there
			// were: from here on only the new ones go back further.
			if next > 0 {
				oldFrom = max(oldFrom, next)
				for flt, fl := range rp.fresh {
					fl.start = max(fl.start, next)
					rp.fresh[flt] = fl
				}
			}
			for _, r := range reqs {
				fl, ok := f.resolve(ctx, src, s, g, r)
				if !ok {
					continue
				}
				rp.fresh[r.Filter] = fl
				if next == 0 || fl.start < next {
					next = fl.start
				}
			}
			if next > 0 {
				s.Pause(g, next)
			}
		}
		if next > 0 {
			gr, ok := src.read(ctx, next)
			if !ok {
				break
			}
			if gr.First > 0 {
				f.countLost(g, "session "+s.ID, gr.From, gr.First)
			}
			for i := range gr.Records {
				rec := &gr.Records[i]
				m, err := message.Decode(rec.Message)
				if err != nil {
					f.metrics.corrupt.Inc()
					continue
				}
				m.User = append(m.User, message.UserProperty{Key: IndexProperty, Value: strconv.FormatUint(rec.Index, 10)})
				pick := func(matching []string) []string {
					var out []string
					for _, flt := range matching {
						if fl, ok := rp.fresh[flt]; ok {
							if fl.wants(rec.Topic, rec.Seq, rec.Index) {
								out = append(out, flt)
							}
						} else if oldFrom > 0 && rec.Seq >= oldFrom {
							out = append(out, flt)
						}
					}
					return out
				}
				if !f.cfg.Broker.ReplayTo(ctx, s, m, g, rec.Seq, pick) {
					f.endReplay(rp)
					return
				}
				f.metrics.replayed.Inc()
			}
			if gr.Next > next {
				next = gr.Next
				continue
			}
		}
		switch f.join(rp, next) {
		case joined:
			return
		case feedBusy:
			wait.Reset(backoffMin)
			select {
			case <-wait.C():
			case <-ctx.Done():
			}
		case feedAhead:
			if next == 0 {
				next = oldFrom // unreachable: join takes a replay with nothing to read
			}
		}
	}
	f.endReplay(rp)
	if ctx.Err() == nil {
		// The group was deleted: its cursor goes with it.
		s.Forget(g)
	}
}

// takePending returns the sx-from requests rp has not resolved yet.
func (f *Feeds) takePending(rp *replay) []session.SubRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	reqs := rp.pending
	rp.pending = nil
	return reqs
}

// resolve asks g's source where r's sx-from starts.
func (f *Feeds) resolve(ctx context.Context, src *source, s *session.Session, g string, r session.SubRequest) (floors, bool) {
	resp, ok := src.seek(ctx, r, false)
	if !ok {
		return floors{}, false
	}
	if resp.Lost > 0 {
		f.metrics.lost.Add(float64(resp.Lost))
		f.log.Warn("delivery: history asked for was removed by retention", "group", g, "reader", "session "+s.ID,
			"filter", r.Filter, "from", r.From.String(), "records", resp.Lost)
	}
	fl := floors{start: resp.Start, floor: resp.Floor, topics: map[string]uint64{}}
	for _, tf := range resp.Floors {
		fl.topics[tf.Topic] = tf.Index
	}
	return fl, true
}

type joinResult int

const (
	joined joinResult = iota
	feedBusy
	feedAhead
)

// join ends rp if it has read as far as the feed delivered: the cursor
// resumes under the feeds' lock, so that the feed's next delivery, which
// takes the lock first, reaches the session. A feed that has not started
// starts at next.
func (f *Feeds) join(rp *replay, next uint64) joinResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(rp.pending) > 0 {
		return feedAhead // another sx-from arrived meanwhile: resolve it first
	}
	fd := f.mu.feeds[rp.key.group]
	switch {
	case next == 0:
		// Nothing to replay: live deliveries resume at the feed's place.
		if fd != nil && fd.delivering {
			return feedBusy
		}
	case fd == nil:
		// The manager has not opened the feed yet: open it here, where
		// the replay ended, and have the manager give it its source.
		fd = &feed{id: rp.key.group, next: next, delivered: next, since: f.clock.Now()}
		f.mu.feeds[fd.id] = fd
		f.metrics.feeds.Inc()
		select {
		case f.wake <- struct{}{}:
		default:
		}
	case fd.delivering:
		return feedBusy
	case fd.next == 0:
		fd.next, fd.delivered = next, next
	case fd.delivered > next:
		return feedAhead
	}
	if f.mu.replays[rp.key] == rp {
		delete(f.mu.replays, rp.key)
	}
	// A leaf call into the session under the feeds' lock: the feed's
	// deliveries take this lock before they reach sessions, never the
	// other way round.
	rp.key.s.Resume(rp.key.group)
	return joined
}

// sendRetained sends s the latest retained messages of g's topics that
// r's filter matches (the retained messages of sequenced topics).
func (f *Feeds) sendRetained(ctx context.Context, s *session.Session, g fsm.Group, r session.SubRequest) {
	// Retained messages are for the subscription's start: past a while
	// without a replica answering, they are not worth waiting for.
	ctx, cancel := context.WithTimeout(ctx, retainedTimeout)
	defer cancel()
	src := &source{f: f, group: g.ID}
	if resp, ok := src.seek(ctx, r, true); ok {
		f.deliverRetained(ctx, s, g.ID, r, resp.Retained)
	}
}

func (f *Feeds) deliverRetained(ctx context.Context, s *session.Session, group string, r session.SubRequest, recs []record) {
	retained := r.Opts.RetainHandling == 0 || r.Opts.RetainHandling == 1
	if !retained {
		return
	}
	for i := range recs {
		m, err := message.Decode(recs[i].Message)
		if err != nil {
			f.metrics.corrupt.Inc()
			continue
		}
		m.Retain = true
		m.User = append(m.User, message.UserProperty{Key: IndexProperty, Value: strconv.FormatUint(recs[i].Index, 10)})
		f.cfg.Broker.DeliverRetainedTo(ctx, s, r.Filter, m)
	}
}

// source is where a replay reads a group: the feed's source or the
// group's home, then the other voters while they fail.
type source struct {
	f     *Feeds
	group string
	node  string
	fails int
	// seen: the group was in this node's metadata copy; missing from it
	// since, it was deleted. Not seen yet, the copy may be behind (a node
	// just restarted, whose sessions' cursors name groups it has not
	// learnt again yet): read and seek wait for it (unknownGroupWait).
	seen       bool
	unseenFrom time.Time
}

// unknownGroupWait bounds how long a replay waits for its group to appear
// in this node's metadata copy before taking it for deleted (and the
// session's cursor on it with it).
const unknownGroupWait = time.Minute

// pick chooses the node to read from.
func (src *source) pick() (string, []string, bool) {
	f := src.f
	rec, ok := f.cfg.Meta.State().Group(src.group)
	if !ok {
		return "", nil, false
	}
	src.seen = true
	if src.node == "" {
		src.node = rec.Home
		f.mu.Lock()
		if fd := f.mu.feeds[src.group]; fd != nil && fd.source != "" {
			src.node = fd.source
		}
		f.mu.Unlock()
	}
	return src.node, rec.Voters, true
}

// failed moves on to the next voter after a backoff; false once the
// context ended or the group is gone.
func (src *source) failed(ctx context.Context, voters []string) bool {
	src.fails++
	if len(voters) > 0 {
		i := slices.Index(voters, src.node)
		src.node = voters[(i+1)%len(voters)]
	}
	t := src.f.clock.NewTimer(min(backoffMin<<min(src.fails-1, 10), backoffMax))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// awaitGroup waits, after pick found no record of the group, for the
// metadata copy to change: true to try again; false when the group is
// gone (it was seen before, or has not appeared for unknownGroupWait) or
// ctx ended.
func (src *source) awaitGroup(ctx context.Context) bool {
	f := src.f
	if src.seen {
		return false
	}
	now := f.clock.Now()
	if src.unseenFrom.IsZero() {
		src.unseenFrom = now
	}
	if now.Sub(src.unseenFrom) >= unknownGroupWait {
		f.log.Warn("delivery: a replay's group did not appear in the metadata copy; taken for deleted",
			"group", src.group, "waited", unknownGroupWait)
		return false
	}
	changed := f.cfg.Meta.Changed()
	if _, ok := f.cfg.Meta.State().Group(src.group); ok {
		return true
	}
	t := f.clock.NewTimer(backoffMax)
	defer t.Stop()
	select {
	case <-changed:
		return true
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// read reads g's records from position from, trying its replicas in turn
// for as long as the group exists (waiting for a metadata copy that has
// not learnt it yet: awaitGroup); false once it is gone or ctx ended.
func (src *source) read(ctx context.Context, from uint64) (groupRecords, bool) {
	f := src.f
	for ctx.Err() == nil {
		node, voters, ok := src.pick()
		if !ok {
			if src.awaitGroup(ctx) {
				continue
			}
			return groupRecords{}, false
		}
		resp, err := f.call(ctx, node, pollRequest{Poll: f.polls.Add(1), Groups: []pollGroup{{Group: src.group, From: from}}})
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].Status == statusOK {
			src.fails = 0
			return resp.Groups[0], true
		}
		if !src.failed(ctx, voters) {
			break
		}
	}
	return groupRecords{}, false
}

// seek resolves r's sx-from (and fetches retained messages) at g's source,
// as read tries the replicas.
func (src *source) seek(ctx context.Context, r session.SubRequest, retained bool) (seekResponse, bool) {
	f := src.f
	req := seekRequest{Group: src.group, Filter: r.Filter, Kind: byte(r.From.Kind), Index: r.From.Index, Retained: retained}
	for ctx.Err() == nil {
		node, voters, ok := src.pick()
		if !ok {
			if src.awaitGroup(ctx) {
				continue
			}
			return seekResponse{}, false
		}
		resp, err := f.seekAt(ctx, node, req)
		if err == nil && resp.Status == statusOK {
			src.fails = 0
			return resp, true
		}
		if !src.failed(ctx, voters) {
			break
		}
	}
	return seekResponse{}, false
}

// seekAt sends a seek to node.
func (f *Feeds) seekAt(ctx context.Context, node string, req seekRequest) (seekResponse, error) {
	return ask(ctx, f, node, MethodSeek, req, f.cfg.Server.seek, appendSeekRequest, decodeSeekResponse)
}
