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
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/router"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("cluster: invalid config")

// Broker is what the cluster layer needs from the node's broker.
type Broker interface {
	DeliverForwarded(m *message.Message, direct bool, groups []string)
	ApplyRetained(m *message.Message) bool
	HandOver(clientID string, cleanStart bool) (*broker.SessionState, error)
	ExportSession(clientID string) (*broker.SessionState, error)
	ReleaseSession(st *broker.SessionState)
	DeliverRelayed(clientID string, ds []broker.Relayed) int
	HoldsSession(clientID string) bool
	RetainedMessages(fn func(*message.Message) bool)
	RetainedTombstones() []*message.Message
	ForgetTombstone(topic string, stamp uint64)
	SessionIDs() []string
}

var _ Broker = (*broker.Broker)(nil)

// Members is the source of cluster membership: the current members (this
// node included) and a stream of changes. EventResync on the stream means
// events were lost and Members must be read again.
type Members interface {
	Members() []membership.Member
	Events() <-chan membership.Event
}

var _ Members = (*membership.Membership)(nil)

// Config configures a Cluster.
type Config struct {
	// NodeID is this node's id, as in membership.
	NodeID string
	// Broker is this node's broker.
	Broker Broker
	// Members tells which nodes exist and where their peer address is (the
	// PeerAddr label).
	Members Members
	// Listener accepts peer links (connections starting with peer.Kind;
	// share the node's peer address with the metadata group through a
	// peer.Mux). The cluster owns it from Start on.
	Listener net.Listener
	// Dial opens peer links (peer.DialTCP in production).
	Dial peer.DialFunc
	// TLS secures peer links (nil: plain); see peer.ClusterTLS.
	TLS *tls.Config
	// Registerer receives the cluster's and the links' metrics.
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
	// sessions not yet registered with their owner (default 10 s); it also
	// happens at once on membership changes and new links.
	ResyncInterval time.Duration
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return fmt.Errorf("%w: no node id", ErrConfig)
	case c.Broker == nil:
		return fmt.Errorf("%w: no broker", ErrConfig)
	case c.Members == nil:
		return fmt.Errorf("%w: no membership", ErrConfig)
	case c.Dial == nil:
		return fmt.Errorf("%w: no dial function", ErrConfig)
	}
	return nil
}

// Cluster is this node's cluster layer; it implements broker.Cluster and
// peer.Handler. See the package doc.
type Cluster struct {
	// immutable after New
	cfg     Config
	id      string
	b       Broker
	peers   *peer.Manager
	clock   clock.Clock
	log     *slog.Logger
	metrics *clusterMetrics
	ctx     context.Context
	cancel  context.CancelFunc
	dirWake chan struct{} // cap 1: the directory should resynchronise
	matches sync.Pool     // *router.Matches[string]
	hlc     hlc

	closed atomic.Bool
	wg     sync.WaitGroup // member watcher, directory loop, RTT prober, background registrations

	rtt struct {
		sync.Mutex
		m map[string]time.Duration // node -> smoothed measured round trip
	}

	remote struct { // peers' interest
		sync.RWMutex
		ix      *router.Index[string]
		filters map[string]map[string]struct{} // node -> filters
	}
	members struct {
		sync.RWMutex
		alive []string // alive members with a peer address, this node included; sorted
		known map[string]membership.Member
	}
	retained struct {
		sync.Mutex
		tombs map[string]tombstone // topic -> latest deletion
	}
	dir struct {
		sync.Mutex
		entries map[string]holding      // client id -> who holds it, for ids this node owns
		local   map[string]localSession // sessions held here
		handing map[string]handing      // sessions exported to another node, kept until it confirms
	}
	mu struct {
		sync.Mutex
		started bool
	}
}

var _ broker.Cluster = (*Cluster)(nil)

// links adapts the Cluster to peer.Handler (whose method names overlap
// broker.Cluster's).
type links struct{ c *Cluster }

var _ peer.Handler = links{}

func (h links) LinkUp(l *peer.Link) { h.c.linkUp(l) }
func (h links) LinkDown(string)     {}
func (h links) Retained(node string, msg []byte) {
	m, err := message.Decode(msg)
	if err != nil {
		h.c.metrics.corrupt.Inc()
		h.c.log.Warn("cluster: undecodable retained update", "from", node, "err", err)
		return
	}
	h.c.applyRetained(m)
}
func (h links) Publish(node string, msg []byte, direct bool, groups []string) {
	h.c.deliver(node, msg, direct, groups)
}
func (h links) Interest(node string, full bool, add, remove []string) {
	h.c.remoteInterest(node, full, add, remove)
}
func (h links) Serve(ctx context.Context, node string, method byte, body []byte) ([]byte, error) {
	return h.c.serve(ctx, node, method, body)
}

// New creates the cluster layer. It starts nothing: call broker.SetCluster
// with it, then Start.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.TombstoneTTL <= 0 {
		cfg.TombstoneTTL = time.Hour
	}
	if cfg.DirectoryTimeout <= 0 {
		cfg.DirectoryTimeout = 5 * time.Second
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 10 * time.Second
	}
	c := &Cluster{
		cfg: cfg, id: cfg.NodeID, b: cfg.Broker, clock: cfg.Clock, log: cfg.Log,
		metrics: newClusterMetrics(cfg.Registerer),
		dirWake: make(chan struct{}, 1),
	}
	c.hlc.clock = cfg.Clock
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.matches.New = func() any { return new(router.Matches[string]) }
	c.remote.ix = router.New[string]()
	c.remote.filters = map[string]map[string]struct{}{}
	c.members.known = map[string]membership.Member{}
	c.rtt.m = map[string]time.Duration{}
	c.members.alive = []string{c.id}
	c.retained.tombs = map[string]tombstone{}
	c.dir.entries = map[string]holding{}
	c.dir.local = map[string]localSession{}
	c.dir.handing = map[string]handing{}
	// Stamps issued after a restart must follow those of the retained
	// messages kept from before.
	cfg.Broker.RetainedMessages(func(m *message.Message) bool {
		c.hlc.observe(m.Stamp)
		return true
	})
	c.loadTombstones(cfg.Broker.RetainedTombstones())
	var err error
	c.peers, err = peer.New(peer.Config{
		NodeID: cfg.NodeID, Listener: cfg.Listener, Dial: cfg.Dial, TLS: cfg.TLS, Handler: links{c},
		Clock: cfg.Clock, Seed: cfg.Seed, Registerer: cfg.Registerer, Log: cfg.Log, Options: cfg.Peer,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return c, nil
}

// Start connects to the current members and follows membership changes.
func (c *Cluster) Start() {
	c.mu.Lock()
	if c.mu.started {
		c.mu.Unlock()
		return
	}
	c.mu.started = true
	c.mu.Unlock()
	c.dir.Lock()
	for _, id := range c.b.SessionIDs() {
		if _, ok := c.dir.local[id]; !ok {
			c.dir.local[id] = localSession{} // loaded from the store: the oldest claim possible
		}
	}
	c.dir.Unlock()
	c.peers.Start()
	c.reconcile(c.cfg.Members.Members())
	c.wg.Add(3)
	go c.watchMembers()
	go c.directoryLoop()
	go c.probeLoop()
}

// Close stops following membership, closes every peer link and waits for
// the layer's goroutines. Calls from the broker after Close do nothing.
func (c *Cluster) Close() error {
	c.mu.Lock() // spawn checks closed under it: no goroutine starts after this
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return c.peers.Close()
}

// spawn runs f on a goroutine the layer owns (Close waits for it), unless
// the layer is closed.
func (c *Cluster) spawn(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// NodeID implements broker.Cluster.
func (c *Cluster) NodeID() string { return c.id }

// Stamp implements broker.Cluster: a hybrid logical clock time.
func (c *Cluster) Stamp() uint64 { return c.hlc.now() }

// Interest implements broker.Cluster: the broker reports a filter's first
// local subscriber (present) and its last one leaving.
func (c *Cluster) Interest(filter string, present bool) {
	if c.closed.Load() {
		return
	}
	c.peers.SetInterest(filter, present)
}

// Peers exposes the link manager (for the admin API and tests).
func (c *Cluster) Peers() *peer.Manager { return c.peers }

// alive reports whether node is an alive member.
func (c *Cluster) alive(node string) bool {
	c.members.RLock()
	defer c.members.RUnlock()
	for _, n := range c.members.alive {
		if n == node {
			return true
		}
	}
	return false
}

// linkUp: a new connection gets every retained message and every
// tombstone, and the directory retries what it could not register. A
// node's interest stays while its link reconnects; it is dropped when
// membership says the node failed or left.
func (c *Cluster) linkUp(l *peer.Link) {
	l.SyncRetained(c.retainedSnapshot())
	c.pokeDirectory()
}

// serve answers the session directory's requests.
func (c *Cluster) serve(ctx context.Context, node string, method byte, body []byte) ([]byte, error) {
	switch method {
	case methodRegister:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		return appendPrevious(nil, c.register(cl)), nil
	case methodRegisterClean:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		prev, superseded := c.registerClean(cl)
		return appendRegistered(nil, prev, superseded), nil
	case methodAssert:
		holder, ids, stamps, err := decodeAssert(body)
		if err != nil {
			return nil, err
		}
		return appendStringList(nil, c.assert(holder, ids, stamps)), nil
	case methodUnregister:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		c.unregister(cl)
		return nil, nil
	case methodDrop:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		c.drop(cl)
		return nil, nil
	case methodPing:
		return nil, nil
	case methodHandOver:
		id, clean, err := decodeHandOver(body)
		if err != nil {
			return nil, err
		}
		if clean {
			if _, err := c.b.HandOver(id, true); err != nil {
				return nil, fmt.Errorf("cluster: hand-over of %q: %w", id, err)
			}
			return nil, nil
		}
		return c.export(node, id)
	case methodRelease:
		id, err := decodeClientID(body)
		if err != nil {
			return nil, err
		}
		c.release(node, id)
		return nil, nil
	case methodSettle:
		id, err := decodeClientID(body)
		if err != nil {
			return nil, err
		}
		return c.settled(id), nil
	case methodRelay:
		return nil, c.relayed(node, body)
	case methodRestore:
		mine, prev, err := decodeRestore(body)
		if err != nil {
			return nil, err
		}
		c.restore(mine, prev)
		return nil, nil
	}
	return nil, fmt.Errorf("%w: unknown method %d from %s", ErrCorrupt, method, node)
}
