package sequenced

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/cluster/hlc"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/run"
	"github.com/sextantmq/sextant/internal/sequencer"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("sequenced: invalid config")

// Meta is what the publish path needs of the metadata group (*meta.Meta).
type Meta interface {
	// State is this node's copy of the metadata: policy rules, group
	// records, the node registry.
	State() fsm.State
	// Changed is closed at the next change of State.
	Changed() <-chan struct{}
	// CaughtUp is closed once State caught up with the group since this
	// node started (meta.Meta.CaughtUp). Before, a route holds its
	// publishes: a copy restarted behind may name a home the group left.
	CaughtUp() <-chan struct{}
	// CreateGroup records a new group, or returns the record another node
	// created first (created false).
	CreateGroup(ctx context.Context, g fsm.Group) (rec fsm.Group, created bool, err error)
}

// Peers sends requests to other nodes (*peer.Manager).
type Peers interface {
	Call(ctx context.Context, node string, method byte, body []byte) ([]byte, error)
	// Up reports whether the link to node is connected.
	Up(node string) bool
}

// Cluster is what the access node knows of the other nodes, to place a new
// group (the cluster layer and membership).
type Cluster interface {
	// Alive returns the alive nodes, this one included.
	Alive() []string
	// EstimateRTT returns the round trip between two nodes that their
	// network coordinates predict.
	EstimateRTT(a, b string) (time.Duration, bool)
}

// Acker receives the reason code a publish's PUBACK or PUBREC carries
// (session.Acker).
type Acker interface {
	Ack(code packet.ReasonCode)
}

// Config configures a Router.
type Config struct {
	NodeID string
	Meta   Meta
	// Home is this node's home side; a batch for a group homed here is
	// handed to it without the network.
	Home *Home
	// Peers reaches other nodes' home sides (nil: a node running alone).
	Peers Peers
	// Cluster lists the nodes a new group may be placed on (nil: this node
	// alone).
	Cluster Cluster
	// MaxGroups is the group budget of a node (the config's max-groups,
	// assumed equal on every node): a node replicating that many groups is
	// not chosen for a new one.
	MaxGroups int
	// Inflight bounds the publishes outstanding per group (default 4096).
	Inflight int
	// WaitTimeout is how long a QoS 1/2 publisher waits for room before
	// its publish fails with 0x97 (default 5 s).
	WaitTimeout time.Duration
	// Retention is the history a group keeps when its rule sets none.
	Retention  fsm.Retention
	Clock      clock.Clock
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Limits of the access node's batches.
const (
	defaultInflight    = 4096
	defaultWaitTimeout = 5 * time.Second
	// maxBatchItems and maxBatchBytes bound one request to the home.
	maxBatchItems = 1024
	maxBatchBytes = 1 << 20
	// maxRequests bounds the requests in flight per group: enough to keep
	// the home's Raft pipeline fed while earlier batches commit.
	maxRequests = 16
	// maxCachedTopics bounds the policy cache.
	maxCachedTopics = 1 << 16
	// createTimeout bounds creating a group in the metadata group.
	createTimeout = 30 * time.Second
	// callTimeout bounds one request to a home (commit included): past it
	// the batch is sent again, and the group recognises what committed.
	callTimeout = 30 * time.Second
)

// Router is the access node's side of the publish path: it takes the
// publishes of sequenced topics from the broker, sends them to their
// group's home in order, and acknowledges each once committed. See the
// package comment.
type Router struct {
	// immutable after New
	cfg     Config
	id      string
	log     *slog.Logger
	clock   clock.Clock
	metrics *metrics
	group   *run.Group // one sender per route, and their calls
	stamps  hlc.Clock  // nonces of publish keys and stream numbers

	cache struct {
		sync.RWMutex
		version uint64
		valid   bool
		topics  map[string]cachedRule
	}
	mu struct {
		sync.Mutex
		routes map[string]*route
	}
}

type cachedRule struct {
	group string // "" : direct
	rule  fsm.Rule
}

// New returns a router; it starts a group's sender on that group's first
// publish.
func New(cfg Config) (*Router, error) {
	switch {
	case cfg.NodeID == "":
		return nil, fmt.Errorf("%w: no node id", ErrConfig)
	case cfg.Meta == nil:
		return nil, fmt.Errorf("%w: no metadata group", ErrConfig)
	case cfg.Home == nil:
		return nil, fmt.Errorf("%w: no home side", ErrConfig)
	case cfg.Inflight < 0 || cfg.MaxGroups < 0 || cfg.WaitTimeout < 0:
		return nil, fmt.Errorf("%w: negative limit", ErrConfig)
	}
	if cfg.Inflight == 0 {
		cfg.Inflight = defaultInflight
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = defaultWaitTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := &Router{cfg: cfg, id: cfg.NodeID, log: cfg.Log, clock: cfg.Clock, metrics: cfg.Home.metrics, group: run.NewGroup(context.Background())}
	r.cache.topics = map[string]cachedRule{}
	r.mu.routes = map[string]*route{}
	return r, nil
}

// Close stops every sender; publishes not yet acknowledged are dropped
// (counted), their clients' connections are closing with the node.
func (r *Router) Close() {
	r.group.Stop()
	r.group.Wait()
	r.mu.Lock()
	routes := r.mu.routes
	r.mu.routes = map[string]*route{}
	r.mu.Unlock()
	for _, rt := range routes {
		rt.drop(DropClosed)
	}
}

// lookup returns topic's group and rule from the policy rules, through a
// cache kept per policy version.
func (r *Router) lookup(topic string) (cachedRule, bool) {
	st := r.cfg.Meta.State()
	v := st.PoliciesVersion()
	r.cache.RLock()
	if r.cache.valid && r.cache.version == v {
		if c, ok := r.cache.topics[topic]; ok {
			r.cache.RUnlock()
			return c, c.group != ""
		}
	}
	r.cache.RUnlock()
	var c cachedRule
	if id, rule, ok := st.GroupFor(topic); ok {
		c = cachedRule{group: id, rule: rule}
	}
	r.cache.Lock()
	if !r.cache.valid || r.cache.version != v || len(r.cache.topics) >= maxCachedTopics {
		clear(r.cache.topics)
		r.cache.version, r.cache.valid = v, true
	}
	r.cache.topics[topic] = c
	r.cache.Unlock()
	return c, c.group != ""
}

// Publish takes m if its topic is sequenced and reports whether it did.
// The message is sent to its group's home; ack (nil for QoS 0) gets the
// PUBACK/PUBREC reason code once it is committed, or why it failed. A
// publish with a packet id carries the key (clientID, packetID, nonce),
// the nonce a hybrid-logical stamp taken now and kept across retries, so
// the group recognises a retry that committed already. When the group has
// Inflight publishes outstanding, a QoS 1/2 publish waits (back-pressure
// on its publisher) and a QoS 0 one is dropped.
func (r *Router) Publish(clientID string, packetID uint16, m *message.Message, ack Acker) bool {
	c, ok := r.lookup(m.Topic)
	if !ok {
		return false
	}
	now := r.clock.Now()
	p := sequencer.Publish{Topic: m.Topic, Message: message.Append(make([]byte, 0, m.Size()), m), Retain: m.Retain, QoS: m.QoS}
	if m.QoS > 0 && packetID != 0 {
		p.Key = sequencer.Key{Client: clientID, PacketID: packetID, Nonce: r.stamps.Stamp(now)}
	}
	it := &item{pub: p, start: now}
	if ack != nil {
		it.acks = []Acker{ack}
	}
	for {
		rt := r.route(c)
		if rt == nil {
			r.metrics.dropped.WithLabelValues(DropClosed).Inc()
			return true
		}
		if rt.add(it) {
			return true
		}
		// The route retired (idle) as this publish came: take a new one.
	}
}

// route returns the sender of c's group, starting it if needed; nil once
// the router is closed. A sender that stays idle for routeIdle retires
// (retire), so a node keeps no goroutine for groups it no longer
// publishes to.
func (r *Router) route(c cachedRule) *route {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt := r.mu.routes[c.group]; rt != nil {
		return rt
	}
	if r.group.Stopped() {
		return nil
	}
	rt := newRoute(r, c.group, c.rule)
	if !r.group.Go(rt.run) {
		return nil
	}
	r.mu.routes[c.group] = rt
	return rt
}

// retire removes rt, idle, from the routes; false if a publish came
// meanwhile.
func (r *Router) retire(rt *route) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !rt.retire() {
		return false
	}
	if r.mu.routes[rt.id] == rt {
		delete(r.mu.routes, rt.id)
	}
	return true
}
