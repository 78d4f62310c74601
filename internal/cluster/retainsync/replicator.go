package retainsync

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/cluster/hlc"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/retained"
	"github.com/sextantmq/sextant/internal/run"
	"github.com/sextantmq/sextant/internal/topic"
)

// Holder is the node's retained messages as replication needs them: the
// broker's index and its store.
type Holder interface {
	// ApplyRetained applies an update from another node if it is newer
	// than the message held, and reports whether it did.
	ApplyRetained(m *message.Message) bool
	// RetainedMessages calls fn for every retained message held.
	RetainedMessages(fn func(*message.Message) bool)
	// RetainedTombstones returns, once, the deletions kept in the store.
	RetainedTombstones() []*message.Message
	// ForgetTombstone removes a stored deletion unless a message was
	// retained on its topic since.
	ForgetTombstone(topic string, stamp uint64)
}

var _ Holder = (*broker.Broker)(nil)

// Peers sends an encoded retained update to every connected peer (a peer
// whose link is down gets the full sync when it reconnects).
type Peers interface {
	SendRetained(msg []byte)
}

var _ Peers = (*peer.Manager)(nil)

// Config configures a Replicator.
type Config struct {
	Holder Holder
	Peers  Peers
	// Clock is the physical time of stamps and tombstones (default: the
	// wall clock); HLC issues the stamps (shared with the session
	// directory).
	Clock clock.Clock
	HLC   *hlc.Clock
	// TTL is how long a deletion is remembered (default 1 h).
	TTL time.Duration
	// SweepInterval is how often Run forgets expired tombstones (default
	// 10 s).
	SweepInterval time.Duration
	// Registerer receives the replication metrics (nil: not exported).
	Registerer prometheus.Registerer
	// Log receives the replicator's logs (default: discarded).
	Log *slog.Logger
}

// Replicator is this node's side of retained replication.
type Replicator struct {
	// immutable after New
	cfg     Config
	applied prometheus.Counter
	stale   prometheus.Counter

	mu struct {
		sync.Mutex
		tombs map[string]tombstone // topic -> latest deletion
	}
}

var _ broker.Replicator = (*Replicator)(nil)

// tombstone remembers a retained deletion.
type tombstone struct {
	stamp   uint64
	origin  string
	expires time.Time
}

// New creates the replicator. It reads the retained messages and
// tombstones the holder loaded, so that stamps issued after a restart
// follow theirs and deletions stay enforced.
func New(cfg Config) *Replicator {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.HLC == nil {
		cfg.HLC = &hlc.Clock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 10 * time.Second
	}
	r := &Replicator{cfg: cfg}
	r.applied = prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_retained_applied_total",
		Help: "Retained updates from peers applied here."})
	r.stale = prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_retained_stale_total",
		Help: "Retained updates from peers ignored as older than what is held (or deleted)."})
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{r.applied, r.stale} {
			_ = cfg.Registerer.Register(c) // a second layer on one registry keeps working, unexported
		}
	}
	r.mu.tombs = map[string]tombstone{}
	cfg.Holder.RetainedMessages(func(m *message.Message) bool {
		cfg.HLC.Observe(m.Stamp)
		return true
	})
	r.load(cfg.Holder.RetainedTombstones())
	return r
}

// Stamp implements broker.Replicator: the hybrid logical time of a retained
// update published here.
func (r *Replicator) Stamp() uint64 { return r.cfg.HLC.Stamp(r.cfg.Clock.Now()) }

// Replicate implements broker.Replicator: a retained update published here
// (already applied locally and stamped) goes to every connected peer.
func (r *Replicator) Replicate(m *message.Message) {
	r.mu.Lock()
	if len(m.Payload) == 0 {
		r.mu.tombs[m.Topic] = tombstone{stamp: m.Stamp, origin: m.Origin, expires: r.cfg.Clock.Now().Add(r.cfg.TTL)}
	} else {
		delete(r.mu.tombs, m.Topic)
	}
	r.mu.Unlock()
	r.cfg.Peers.SendRetained(message.Append(make([]byte, 0, m.Size()), m))
}

// Apply applies a retained update from a peer: last writer wins by
// (Stamp, Origin), and a deletion newer than the update (a tombstone) wins
// over it even when the message is no longer held.
func (r *Replicator) Apply(m *message.Message) {
	r.cfg.HLC.Observe(m.Stamp)
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.mu.tombs[m.Topic]; ok && !retained.Newer(m, t.stamp, t.origin) {
		r.stale.Inc()
		return
	}
	applied := r.cfg.Holder.ApplyRetained(m)
	switch {
	case !applied:
		r.stale.Inc()
	case len(m.Payload) == 0:
		r.mu.tombs[m.Topic] = tombstone{stamp: m.Stamp, origin: m.Origin, expires: r.cfg.Clock.Now().Add(r.cfg.TTL)}
		r.applied.Inc()
	default:
		delete(r.mu.tombs, m.Topic)
		r.applied.Inc()
	}
}

// Snapshot encodes every retained message and live tombstone, for the full
// sync on a new link. This node's own $SYS statistics are left out.
func (r *Replicator) Snapshot() [][]byte {
	var out [][]byte
	r.cfg.Holder.RetainedMessages(func(m *message.Message) bool {
		if m.Stamp == 0 && m.Origin == "" && topic.IsSys(m.Topic) {
			return true
		}
		out = append(out, message.Append(nil, m))
		return true
	})
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	for t, ts := range r.mu.tombs {
		if now.After(ts.expires) {
			continue
		}
		out = append(out, message.Append(nil, &message.Message{Topic: t, Retain: true, Stamp: ts.stamp, Origin: ts.origin}))
	}
	r.mu.Unlock()
	return out
}

// Run sweeps expired tombstones every SweepInterval until ctx ends.
func (r *Replicator) Run(ctx context.Context) {
	run.Every(ctx, r.cfg.Clock, r.cfg.SweepInterval, r.cfg.SweepInterval, func(context.Context) { r.Sweep() })
}

// Sweep forgets deletions older than TTL, here and in the store.
func (r *Replicator) Sweep() {
	now := r.cfg.Clock.Now()
	var gone []message.Message
	r.mu.Lock()
	for t, ts := range r.mu.tombs {
		if now.After(ts.expires) {
			delete(r.mu.tombs, t)
			gone = append(gone, message.Message{Topic: t, Stamp: ts.stamp})
		}
	}
	r.mu.Unlock()
	for _, m := range gone {
		r.cfg.Holder.ForgetTombstone(m.Topic, m.Stamp)
	}
}

// load takes the deletions the broker kept in its store: each lasts TTL
// from the time in its stamp (expired ones go at the next sweep, which also
// removes them from the store).
func (r *Replicator) load(ms []*message.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range ms {
		r.cfg.HLC.Observe(m.Stamp)
		expires := hlc.Time(m.Stamp).Add(r.cfg.TTL)
		if cur, ok := r.mu.tombs[m.Topic]; ok && !retained.Newer(m, cur.stamp, cur.origin) {
			continue
		}
		r.mu.tombs[m.Topic] = tombstone{stamp: m.Stamp, origin: m.Origin, expires: expires}
	}
}
