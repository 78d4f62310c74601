package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/run"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/topic"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("delivery: invalid config")

// IndexProperty is the MQTT 5 user property every delivered message of a
// sequenced topic carries: its index in its topic.
const IndexProperty = "sx-index"

// Meta is what feeds need of the metadata group (*meta.Meta).
type Meta interface {
	State() fsm.State
	Changed() <-chan struct{}
}

// Peers sends requests to other nodes (*peer.Manager).
type Peers interface {
	Call(ctx context.Context, node string, method byte, body []byte) ([]byte, error)
	Up(node string) bool
}

// Broker delivers a group's records to local sessions
// (*broker.Broker).
type Broker interface {
	// DeliverSequenced delivers records of a group, in its order (ms[i]
	// at position seqs[i]), to every local subscriber (each session takes
	// them through its cursor on the group).
	DeliverSequenced(group string, ms []*message.Message, seqs []uint64)
	// ReplayTo delivers a replayed record to one session, through the
	// subscriptions pick chooses; false once the session is gone.
	ReplayTo(ctx context.Context, s *session.Session, m *message.Message, group string, seq uint64, pick func(matching []string) []string) bool
	// DeliverRetainedTo sends s a retained message for its subscription
	// filter.
	DeliverRetainedTo(ctx context.Context, s *session.Session, filter string, m *message.Message)
}

// Config configures Feeds.
type Config struct {
	NodeID string
	Meta   Meta
	// Server reads the groups this node replicates without the network.
	Server *Server
	// Peers reaches other nodes' servers (nil: a node running alone).
	Peers  Peers
	Broker Broker
	// PollWait is how long a replica holds a poll with nothing to send
	// (default 5 s): an idle feed costs one round trip per PollWait.
	PollWait   time.Duration
	Clock      clock.Clock
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Timing of feeds.
const (
	defaultPollWait = 5 * time.Second
	// startMargin: a new feed starts at the first record of its group
	// appended at most this long before the first local subscription that
	// wants it (a group created by a publish after the subscription
	// starts at its first record), covering the skew between this node's
	// clock and the group leader's.
	startMargin = 100 * time.Millisecond
	backoffMin  = 20 * time.Millisecond
	backoffMax  = time.Second
)

// Feeds bring the records of every placement group that local subscribers
// may want to this node, in each group's order, and deliver them to the
// broker. See the package comment.
type Feeds struct {
	// immutable after New
	cfg     Config
	id      string
	log     *slog.Logger
	clock   clock.Clock
	metrics *metrics
	group   *run.Group
	wake    chan struct{} // cap 1: interest changed
	polls   atomic.Uint64 // poll numbers
	// replaySlots bounds the replays running at once.
	replaySlots chan struct{}

	mu struct {
		sync.Mutex
		interest map[string]*filterInterest // local filter (shared prefix removed) -> subscriptions
		feeds    map[string]*feed           // by group
		pollers  map[string]*poller         // by source node
		replays  map[replayKey]*replay      // running or about to (replay.go)
		idle     map[replayKey]bool         // replays registered at Subscribing, started at Subscribed
	}
}

type filterInterest struct {
	n     int
	since time.Time // when the count last went from 0 to 1
}

// feed is one group's stream of records into this node.
type feed struct {
	id      string
	filters []string  // local filters that may match the group's topics
	since   time.Time // where a feed that has not started yet starts
	next    uint64    // the next position to poll (0: not started)
	// delivered is the next position to deliver: next less the records
	// polled and still queued for delivery (poller.go).
	delivered uint64
	home      string // the group's home, per its record
	epoch     uint64 // the record's epoch home was read at
	voters    []string
	source    string // the node polled: the home, or another voter while the home fails
	fails     int
	hold      time.Time // not polled before
	// pending counts the batches of the feed that owner has queued for
	// delivery or is delivering; another poller does not poll or deliver
	// the feed until they are done, so its records stay in order.
	pending int
	owner   *poller
	// delivering: a batch of it is being handed to sessions right now (a
	// replay does not join the feed in the middle of one).
	delivering bool
}

// New returns feeds; Start begins following the metadata group.
func New(cfg Config) (*Feeds, error) {
	switch {
	case cfg.NodeID == "":
		return nil, fmt.Errorf("%w: no node id", ErrConfig)
	case cfg.Meta == nil || cfg.Server == nil || cfg.Broker == nil:
		return nil, fmt.Errorf("%w: metadata, server and broker are required", ErrConfig)
	case cfg.PollWait < 0 || cfg.PollWait > maxWait:
		return nil, fmt.Errorf("%w: poll wait %v outside 0..%v", ErrConfig, cfg.PollWait, maxWait)
	}
	if cfg.PollWait == 0 {
		cfg.PollWait = defaultPollWait
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f := &Feeds{cfg: cfg, id: cfg.NodeID, log: cfg.Log, clock: cfg.Clock, metrics: newMetrics(cfg.Registerer),
		group: run.NewGroup(context.Background()), wake: make(chan struct{}, 1), replaySlots: make(chan struct{}, maxReplays)}
	f.mu.interest = map[string]*filterInterest{}
	f.mu.feeds = map[string]*feed{}
	f.mu.pollers = map[string]*poller{}
	f.mu.replays = map[replayKey]*replay{}
	f.mu.idle = map[replayKey]bool{}
	return f, nil
}

// Start begins following the metadata group and local interest.
func (f *Feeds) Start() { f.group.Go(f.manage) }

// Close stops every feed and waits for its goroutines.
func (f *Feeds) Close() {
	f.group.Stop()
	f.group.Wait()
}

// AddInterest implements broker.Interest: n local subscriptions to filter
// were added (n > 0) or removed.
func (f *Feeds) AddInterest(filter string, n int) {
	if _, inner, shared, err := topic.ParseShared(filter); err == nil && shared {
		filter = inner
	}
	f.mu.Lock()
	fi := f.mu.interest[filter]
	if fi == nil {
		fi = &filterInterest{}
		f.mu.interest[filter] = fi
	}
	if fi.n <= 0 && n > 0 {
		fi.since = f.clock.Now()
	}
	fi.n += n
	if fi.n <= 0 {
		delete(f.mu.interest, filter)
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// InterestSince implements broker.InterestSince: the local interest in
// filter goes back to since (a persistent session loaded from the store
// subscribed then), so a feed not started yet starts no later than that
// (less the margin): records of a group the session has no cursor on,
// appended since it subscribed and before this node started, reach it.
func (f *Feeds) InterestSince(filter string, since time.Time) {
	if _, inner, shared, err := topic.ParseShared(filter); err == nil && shared {
		filter = inner
	}
	f.mu.Lock()
	if fi := f.mu.interest[filter]; fi != nil && !since.IsZero() && since.Before(fi.since) {
		fi.since = since
	}
	f.mu.Unlock()
}

// manage opens and closes feeds as groups and local interest change.
func (f *Feeds) manage(ctx context.Context) {
	for {
		ch := f.cfg.Meta.Changed()
		f.reconcile(f.cfg.Meta.State())
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-f.wake:
		}
	}
}

// reconcile makes the feeds those of the groups whose rule may match a
// local subscription, each polling its group's home (or, while the home
// fails, another voter).
func (f *Feeds) reconcile(st fsm.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	wanted := map[string]bool{}
	for _, g := range st.Groups() {
		var filters []string
		var since time.Time
		for flt, fi := range f.mu.interest {
			if topic.Overlap(flt, g.Rule) {
				filters = append(filters, flt)
				if since.IsZero() || fi.since.Before(since) {
					since = fi.since
				}
			}
		}
		if len(filters) == 0 {
			continue
		}
		slices.Sort(filters)
		wanted[g.ID] = true
		fd := f.mu.feeds[g.ID]
		if fd == nil {
			fd = &feed{id: g.ID, since: since.Add(-startMargin)}
			f.mu.feeds[g.ID] = fd
			f.metrics.feeds.Inc()
		}
		if !slices.Equal(fd.filters, filters) {
			fd.filters = filters
			f.dirtyLocked(fd.source)
		}
		fd.voters = g.Voters
		if g.Epoch != fd.epoch {
			fd.home, fd.epoch = g.Home, g.Epoch
			if fd.source != g.Home {
				f.moveLocked(fd, g.Home)
			}
			fd.fails, fd.hold = 0, time.Time{}
		}
	}
	for id, fd := range f.mu.feeds {
		if !wanted[id] {
			delete(f.mu.feeds, id)
			f.metrics.feeds.Dec()
			f.dirtyLocked(fd.source)
		}
	}
}

// moveLocked makes fd poll node from now on.
func (f *Feeds) moveLocked(fd *feed, node string) {
	old := fd.source
	fd.source = node
	if old != "" {
		f.metrics.moves.Inc()
		f.dirtyLocked(old)
	}
	f.dirtyLocked(node)
}

// dirtyLocked tells node's poller its feeds changed (starting one if
// needed): it drops the poll it waits on and sends a new one.
func (f *Feeds) dirtyLocked(node string) {
	if node == "" {
		return
	}
	p := f.mu.pollers[node]
	if p == nil {
		p = newPoller(f, node)
		if !f.group.Go(p.run) {
			return
		}
		f.mu.pollers[node] = p
	}
	p.interruptLocked()
}

// failLocked handles a failed poll of fd: it tries the next voter after
// a backoff.
func (f *Feeds) failLocked(fd *feed) {
	fd.fails++
	d := min(backoffMin<<min(fd.fails-1, 10), backoffMax)
	fd.hold = f.clock.Now().Add(d)
	next := fd.home
	if len(fd.voters) > 0 {
		i := slices.Index(fd.voters, fd.source)
		next = fd.voters[(i+1)%len(fd.voters)]
	}
	if next != "" && next != fd.source {
		f.moveLocked(fd, next)
	}
}

// up reports whether node can be polled: this node, or a connected peer.
func (f *Feeds) up(node string) bool {
	return node == f.id || (f.cfg.Peers != nil && f.cfg.Peers.Up(node))
}

// call polls node: this node's server directly, another over its link.
func (f *Feeds) call(ctx context.Context, node string, req pollRequest) (pollResponse, error) {
	return ask(ctx, f, node, MethodPoll, req, func(r pollRequest) pollResponse { return f.cfg.Server.poll(ctx, f.id, r) },
		appendPollRequest, decodePollResponse)
}

// ask sends req to node's server: this node's directly (local), another's
// over its link as method, encoded and decoded with enc and dec.
func ask[Req, Resp any](ctx context.Context, f *Feeds, node string, method byte, req Req, local func(Req) Resp,
	enc func([]byte, Req) []byte, dec func([]byte) (Resp, error)) (Resp, error) {
	if node == f.id {
		return local(req), nil
	}
	var zero Resp
	if f.cfg.Peers == nil || !f.cfg.Peers.Up(node) {
		return zero, fmt.Errorf("delivery: no connected link to %s", node)
	}
	body, err := f.cfg.Peers.Call(ctx, node, method, enc(nil, req))
	if err != nil {
		return zero, err
	}
	return dec(body)
}

// deliver hands records to the broker, in order, each with its index as
// the sx-index user property.
func (f *Feeds) deliver(group string, recs []record) {
	ms := make([]*message.Message, 0, len(recs))
	seqs := make([]uint64, 0, len(recs))
	var prev *message.Message
	for i := range recs {
		m, err := message.DecodeAfter(recs[i].Message, prev, 1)
		if err != nil {
			f.metrics.corrupt.Inc()
			f.log.Error("delivery: a record's message does not decode", "group", group, "seq", recs[i].Seq, "err", err)
			continue
		}
		m.User = append(m.User, message.UserProperty{Key: IndexProperty, Value: strconv.FormatUint(recs[i].Index, 10)})
		ms, seqs, prev = append(ms, m), append(seqs, recs[i].Seq), m
	}
	if len(ms) > 0 {
		f.cfg.Broker.DeliverSequenced(group, ms, seqs)
	}
	f.metrics.delivered.Add(float64(len(recs)))
}

// countLost reports positions retention removed before this node read
// them: never skipped silently.
func (f *Feeds) countLost(group, who string, from, first uint64) {
	if first <= from {
		return
	}
	f.metrics.lost.Add(float64(first - from))
	f.log.Warn("delivery: records were removed by retention before they were delivered",
		"group", group, "reader", who, "from_seq", from, "to_seq", first-1, "records", first-from)
}
