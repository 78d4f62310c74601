package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/cluster/directory"
	"github.com/sextantmq/sextant/internal/cluster/hlc"
	"github.com/sextantmq/sextant/internal/cluster/retainsync"
	"github.com/sextantmq/sextant/internal/cluster/routing"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/run"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("cluster: invalid config")

// ErrCorrupt reports a relay notification from a peer that cannot be
// decoded.
var ErrCorrupt = errors.New("cluster: corrupt encoding")

// Deliverer delivers a message another node forwarded here to local
// subscribers only (the broker).
type Deliverer interface {
	DeliverForwarded(m *message.Message, direct bool, groups []string)
}

var _ Deliverer = (*broker.Broker)(nil)

// Members is the source of cluster membership: the current members (this
// node included) and a stream of changes. EventResync on the stream means
// events were lost and Members must be read again.
type Members interface {
	Members() []membership.Member
	Events() <-chan membership.Event
}

var _ Members = (*membership.Membership)(nil)

// Config configures a Layer.
type Config struct {
	// NodeID is this node's id, as in membership.
	NodeID string
	// Deliver, Relays, Retained and Sessions are this node's broker, as
	// each part of the layer sees it.
	Deliver  Deliverer
	Relays   Relays
	Retained retainsync.Holder
	Sessions directory.Sessions
	// Members tells which nodes exist and where their peer address is (the
	// PeerAddr label).
	Members Members
	// Estimate estimates the round trip between two nodes from their
	// network coordinates (membership.EstimateRTT); the links rank transit
	// nodes by it. nil: unknown (ties are broken by node id).
	Estimate func(a, b string) (time.Duration, bool)
	// Listener accepts peer links (connections starting with peer.Kind;
	// share the node's peer address with the metadata group through a
	// peer.Mux). The layer owns it from Start on.
	Listener net.Listener
	// Dial opens peer links (netx.DialTCP in production).
	Dial netx.DialFunc
	// TLS secures peer links (nil: plain); see peer.ClusterTLS.
	TLS *tls.Config
	// Registerer receives the layer's and the links' metrics.
	Registerer prometheus.Registerer
	// Clock is the time source (default: the wall clock).
	Clock clock.Clock
	// Log receives the layer's logs (default: discarded).
	Log *slog.Logger
	// Seed seeds the links' reconnection jitter.
	Seed uint64
	// Peer tunes the links.
	Peer peer.Options
	// TombstoneTTL is how long a retained deletion is remembered, so that an
	// older write arriving late does not bring the message back (default 1 h).
	TombstoneTTL time.Duration
	// DirectoryTimeout bounds a session lookup and hand-over at CONNECT
	// (default 5 s; the broker's connect timeout bounds it too).
	DirectoryTimeout time.Duration
	// ResyncInterval is how often the session directory re-registers the
	// sessions not yet registered with their owner and settles hand-overs,
	// and how often expired tombstones are swept (default 10 s); the
	// directory also resynchronises at once on membership changes and new
	// links.
	ResyncInterval time.Duration
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return fmt.Errorf("%w: no node id", ErrConfig)
	case c.Deliver == nil || c.Relays == nil || c.Retained == nil || c.Sessions == nil:
		return fmt.Errorf("%w: no broker", ErrConfig)
	case c.Members == nil:
		return fmt.Errorf("%w: no membership", ErrConfig)
	case c.Dial == nil:
		return fmt.Errorf("%w: no dial function", ErrConfig)
	}
	return nil
}

// Layer is this node's cluster layer: the shell that wires interest
// routing (routing.Table), retained replication (retainsync.Replicator) and
// the session directory (directory.Service) to the peer links and to
// membership. See the package doc.
type Layer struct {
	// immutable after New
	cfg      Config
	id       string
	deliver  Deliverer
	relays   Relays
	peers    *peer.Manager
	routes   *routing.Table
	retained *retainsync.Replicator
	dir      *directory.Service
	clock    clock.Clock
	log      *slog.Logger
	metrics  *layerMetrics
	group    *run.Group // member watcher, directory loop, tombstone sweeper, RTT prober, background registrations
	targets  sync.Pool  // *[]routing.Target, for Forward

	rtt struct {
		sync.Mutex
		m map[string]time.Duration // node -> smoothed measured round trip
	}
	members struct {
		sync.Mutex
		alive []string // alive members with a peer address, this node included; sorted
		known map[string]membership.Member
	}
	services atomic.Pointer[map[byte]ServeFunc] // requests served outside the layer (Handle)

	mu struct {
		sync.Mutex
		started bool
	}
}

// ServeFunc answers a request (or a notification) a peer sent with a
// method registered with Handle. body is the caller's and may be kept; ctx
// ends when the layer closes.
type ServeFunc func(ctx context.Context, node string, body []byte) ([]byte, error)

// FirstServiceMethod is the lowest request method Handle accepts: those
// below belong to the layer itself (ping, relay) and the session directory.
const FirstServiceMethod byte = 32

// Handle serves the peer requests with method with fn: the services built
// on the layer's links (the sequenced publish path, feeds) answer their own
// requests. Call it before Start.
func (l *Layer) Handle(method byte, fn ServeFunc) error {
	if method < FirstServiceMethod || fn == nil {
		return fmt.Errorf("%w: service method %d (want %d and up, with a function)", ErrConfig, method, FirstServiceMethod)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.started {
		return fmt.Errorf("%w: Handle after Start", ErrConfig)
	}
	next := map[byte]ServeFunc{}
	if cur := l.services.Load(); cur != nil {
		for k, v := range *cur {
			next[k] = v
		}
	}
	if _, dup := next[method]; dup {
		return fmt.Errorf("%w: service method %d handled twice", ErrConfig, method)
	}
	next[method] = fn
	l.services.Store(&next)
	return nil
}

var (
	_ broker.Forwarder = (*Layer)(nil)
	_ broker.Interest  = (*Layer)(nil)
)

// New creates the cluster layer. It starts nothing: connect the broker
// with Remote, then call Start.
func New(cfg Config) (*Layer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	l := &Layer{
		cfg: cfg, id: cfg.NodeID, deliver: cfg.Deliver, relays: cfg.Relays, clock: cfg.Clock, log: cfg.Log,
		metrics: newLayerMetrics(cfg.Registerer),
		routes:  routing.NewTable(),
		group:   run.NewGroup(context.Background()),
	}
	l.targets.New = func() any { return new([]routing.Target) }
	l.rtt.m = map[string]time.Duration{}
	l.members.known = map[string]membership.Member{}
	l.members.alive = []string{l.id}
	var err error
	l.peers, err = peer.New(peer.Config{
		NodeID: cfg.NodeID, Listener: cfg.Listener, Dial: cfg.Dial, TLS: cfg.TLS, Handler: links{l},
		Clock: cfg.Clock, Seed: cfg.Seed, Registerer: cfg.Registerer, Log: cfg.Log, Options: cfg.Peer,
		Estimate: cfg.Estimate,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	stamps := &hlc.Clock{} // retained updates and session claims share one clock
	l.retained = retainsync.New(retainsync.Config{
		Holder: cfg.Retained, Peers: l.peers, Clock: cfg.Clock, HLC: stamps, TTL: cfg.TombstoneTTL,
		SweepInterval: cfg.ResyncInterval, Registerer: cfg.Registerer, Log: cfg.Log,
	})
	l.dir = directory.New(directory.Config{
		NodeID: cfg.NodeID, Sessions: cfg.Sessions, Peers: l.peers, Group: l.group, Clock: cfg.Clock, HLC: stamps,
		Timeout: cfg.DirectoryTimeout, ResyncInterval: cfg.ResyncInterval, Registerer: cfg.Registerer, Log: cfg.Log,
	})
	return l, nil
}

// Remote returns what the broker needs of the cluster (broker.SetRemote):
// this layer's routing, interest and relay, its retained replicator and
// its session directory.
func (l *Layer) Remote() broker.Remote {
	return broker.Remote{NodeID: l.id, Forwarder: l, Interest: l, Retained: l.retained, Sessions: l.dir, Relay: l}
}

// Start connects to the current members and follows membership changes.
func (l *Layer) Start() {
	l.mu.Lock()
	if l.mu.started {
		l.mu.Unlock()
		return
	}
	l.mu.started = true
	l.mu.Unlock()
	l.dir.Start()
	l.peers.Start()
	l.reconcile(l.cfg.Members.Members())
	l.group.Go(l.watchMembers)
	l.group.Go(l.dir.Run)
	l.group.Go(l.retained.Run)
	l.group.Go(l.probeLoop)
}

// Close stops following membership, closes every peer link and waits for
// the layer's goroutines. Calls from the broker after Close do nothing.
func (l *Layer) Close() error {
	if !l.group.Stop() {
		return nil
	}
	l.group.Wait()
	return l.peers.Close()
}

// NodeID returns this node's id.
func (l *Layer) NodeID() string { return l.id }

// AddInterest implements broker.Interest: the peer links count and
// announce this node's interest.
func (l *Layer) AddInterest(filter string, n int) {
	if l.group.Stopped() {
		return
	}
	l.peers.AddInterest(filter, n)
}

// Peers exposes the link manager (for the admin API and tests).
func (l *Layer) Peers() *peer.Manager { return l.peers }

// Directory exposes the session directory (for tests).
func (l *Layer) Directory() *directory.Service { return l.dir }

// RemoteInterest returns the filters each peer has announced (for the
// admin API and tests).
func (l *Layer) RemoteInterest() map[string][]string { return l.routes.Interest() }

// methodPing is the layer's own request on peer links: answered at once,
// for round-trip probes. The session directory's requests share the number
// space (package directory leaves 6 and 11, methodRelay, to the shell).
const methodPing byte = 6

// links adapts the Layer to peer.Handler (whose method names would
// otherwise overlap the broker-facing ones).
type links struct{ l *Layer }

var _ peer.Handler = links{}

// LinkUp: a new connection gets every retained message and every
// tombstone, and the directory retries what it could not register. A
// node's interest stays while its link reconnects; it is dropped when
// membership says the node failed or left. Each connection's start and
// end is logged once: the link's redials in between are not (peer logs
// them at debug), so a dead node costs one line here.
func (h links) LinkUp(pl *peer.Link) {
	h.l.log.Info("link to node up", "peer", pl.Node())
	pl.SyncRetained(h.l.retained.Snapshot())
	h.l.dir.Poke()
}

func (h links) LinkDown(node string) {
	h.l.log.Info("link to node down", "peer", node)
}

func (h links) Publish(node string, msg []byte, direct bool, groups []string) {
	h.l.receive(node, msg, direct, groups)
}

func (h links) Retained(node string, msg []byte) {
	m, err := message.Decode(msg)
	if err != nil {
		h.l.metrics.corrupt.Inc()
		h.l.log.Warn("cluster: undecodable retained update", "from", node, "err", err)
		return
	}
	h.l.retained.Apply(m)
}

func (h links) Interest(node string, full bool, add, remove []string) {
	if node == h.l.id {
		return
	}
	for _, f := range h.l.routes.Announce(node, full, add, remove) {
		h.l.log.Warn("cluster: peer announced an invalid filter", "from", node, "filter", f)
	}
	h.l.metrics.remoteFilters.Set(float64(h.l.routes.Len()))
}

func (h links) Serve(ctx context.Context, node string, method byte, body []byte) ([]byte, error) {
	switch method {
	case methodPing:
		return nil, nil
	case methodRelay:
		return nil, h.l.relayed(node, body)
	}
	if method >= FirstServiceMethod {
		if svc := h.l.services.Load(); svc != nil {
			if fn := (*svc)[method]; fn != nil {
				return fn(ctx, node, body)
			}
		}
		return nil, fmt.Errorf("cluster: no service for request method %d", method)
	}
	return h.l.dir.Serve(ctx, node, method, body)
}
