package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/run"
)

// ErrClosed is returned by operations on a removed link or closed manager.
var ErrClosed = errors.New("peer: closed")

// ErrNoLink is returned by a call to a node this manager has no link to.
var ErrNoLink = errors.New("peer: no link")

// maxHandshakes bounds the inbound connections in their handshake at once;
// more are closed at once.
const maxHandshakes = 64

// Manager owns this node's links to its peers: one per peer, added and
// removed by the caller (from cluster membership), plus the accept loop
// for inbound connections and the goroutines serving requests.
type Manager struct {
	// immutable after New
	cfg         Config
	opts        Options
	clock       clock.Clock
	log         *slog.Logger
	metrics     *metrics
	interest    *interest
	incarnation uint64
	group       *run.Group    // accept loop, handshakes, request handlers; its context ends at Close
	requests    chan struct{} // semaphore of request handlers
	handshakes  chan struct{} // semaphore of inbound handshakes

	links atomic.Pointer[map[string]*Link] // copy on write, for lookups on the publish path
	list  atomic.Pointer[[]*Link]          // the same links sorted by id, for writers and reroute
	gens  atomic.Uint64                    // outbox generations: each new outbox starts a new epoch

	origins *origins   // inboxes of the nodes that send here
	routeMu sync.Mutex // serialises reroute
	reach   struct {
		sync.Mutex
		version uint64
		frame   reachFrame // this node's announcement
	}

	rng struct {
		sync.Mutex
		r *rand.Rand
	}
	mu struct {
		sync.Mutex
		links   map[string]*Link
		started bool
		closed  bool
	}
}

// New creates a manager; it does not listen or dial until Start and Add.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	m := &Manager{
		cfg: cfg, opts: cfg.Options.withDefaults(), clock: cfg.Clock, log: cfg.Log,
		metrics:     newMetrics(cfg.Registerer),
		interest:    newInterest(),
		incarnation: uint64(cfg.Clock.Now().UnixNano()),
		origins:     newOrigins(),
	}
	m.requests = make(chan struct{}, m.opts.MaxRequests)
	m.handshakes = make(chan struct{}, maxHandshakes)
	m.group = run.NewGroup(context.Background())
	m.rng.r = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5851f42d4c957f2d))
	m.mu.links = map[string]*Link{}
	m.publishLinks()
	return m, nil
}

// NodeID returns this node's id.
func (m *Manager) NodeID() string { return m.cfg.NodeID }

// Start begins accepting inbound connections and re-evaluating paths.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.started || m.mu.closed {
		return
	}
	m.mu.started = true
	m.group.Go(m.routeLoop)
	if m.cfg.Listener != nil {
		m.group.Go(m.acceptLoop)
	}
}

// Add makes sure there is a link to node id at addr: a new link starts
// connecting (this node dials if its id is the smaller one, else it waits
// for the peer to dial); an existing one uses addr for its next dial.
func (m *Manager) Add(id, addr string) {
	if id == m.cfg.NodeID {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return
	}
	if l := m.mu.links[id]; l != nil {
		l.setAddr(addr)
		return
	}
	l := newLink(m, id, addr)
	m.mu.links[id] = l
	m.publishLinks()
	go l.run()
}

// Remove stops and forgets the link to node id: its connection is closed
// and its queued messages are dropped (counted as DropRemoved). It waits
// for the link's goroutines, so it must not be called from a Handler
// method running on that link.
func (m *Manager) Remove(id string) {
	m.mu.Lock()
	l := m.mu.links[id]
	if l != nil {
		delete(m.mu.links, id)
		m.publishLinks()
	}
	m.mu.Unlock()
	if l == nil {
		return
	}
	l.stop()
	m.metrics.forget(id)
	m.reroute() // outboxes that went through it
}

func (m *Manager) publishLinks() {
	cp := make(map[string]*Link, len(m.mu.links))
	list := make([]*Link, 0, len(m.mu.links))
	for k, v := range m.mu.links {
		cp[k] = v
		list = append(list, v)
	}
	slices.SortFunc(list, func(a, b *Link) int { return strings.Compare(a.id, b.id) })
	m.links.Store(&cp)
	m.list.Store(&list)
}

// Link returns the link to node id, or nil.
func (m *Manager) Link(id string) *Link { return (*m.links.Load())[id] }

// Links returns every link.
func (m *Manager) Links() []*Link {
	ls := *m.links.Load()
	out := make([]*Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, l)
	}
	return out
}

// Publish queues p on the link to node id (see Link.Publish), counting it
// as dropped if there is no such link.
func (m *Manager) Publish(id string, p *Publish) {
	if l := m.Link(id); l != nil {
		l.Publish(p)
		return
	}
	m.metrics.dropped.WithLabelValues(id, DropNoLink).Inc()
}

// AddInterest adds n local subscriptions to filter (as subscribed,
// "$share/group/filter" for shared ones); n is negative for removals. A
// filter is announced while its count is positive; see the package doc.
// Links announce the change.
func (m *Manager) AddInterest(filter string, n int) {
	if !m.interest.add(filter, n) {
		return
	}
	for _, l := range *m.links.Load() {
		l.poke()
	}
}

// SendRetained sends one retained update (a message.Append encoding) to
// every peer that can be reached, directly or through a transit node; see
// Link.SendRetained.
func (m *Manager) SendRetained(msg []byte) {
	for _, l := range *m.links.Load() {
		l.SendRetained(msg)
	}
}

// Call sends a request to node id and waits for its answer (Link.Call);
// it fails with ErrNoLink if there is no link to id.
func (m *Manager) Call(ctx context.Context, id string, method byte, body []byte) ([]byte, error) {
	l := m.Link(id)
	if l == nil {
		return nil, fmt.Errorf("peer: call to %s: %w", id, ErrNoLink)
	}
	return l.Call(ctx, method, body)
}

// Notify sends a request whose answer is not wanted to node id, if its
// link is connected (Link.Notify); it reports whether it was queued.
func (m *Manager) Notify(id string, method byte, body []byte) bool {
	if l := m.Link(id); l != nil {
		return l.Notify(method, body)
	}
	return false
}

// Up reports whether the link to node id is connected.
func (m *Manager) Up(id string) bool {
	l := m.Link(id)
	return l != nil && l.Up()
}

// Close stops accepting, removes every link and waits for every goroutine
// the manager started.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	links := m.mu.links
	m.mu.links = map[string]*Link{}
	m.publishLinks()
	m.mu.Unlock()
	m.group.Stop()
	var err error
	if m.cfg.Listener != nil {
		if cerr := m.cfg.Listener.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("peer: close listener: %w", cerr)
		}
	}
	for id, l := range links {
		l.stop()
		m.metrics.forget(id)
	}
	m.group.Wait()
	return err
}

// backoff returns the wait before dial attempt n (n >= 1): exponential from
// BackoffMin, capped at BackoffMax, with the upper half jittered.
func (m *Manager) backoff(n int) time.Duration {
	d := m.opts.BackoffMin
	for i := 1; i < n && d < m.opts.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, m.opts.BackoffMax)
	m.rng.Lock()
	j := time.Duration(m.rng.r.Int64N(int64(d/2) + 1))
	m.rng.Unlock()
	return d/2 + j
}

func (m *Manager) acceptLoop(ctx context.Context) {
	netx.Accept(ctx, m.cfg.Listener, m.clock, m.log.With("listener", "peer"), func(c net.Conn) bool {
		select {
		case m.handshakes <- struct{}{}:
		default:
			_ = c.Close() // too many half-open connections
			return true
		}
		if !m.group.Go(func(context.Context) {
			defer func() { <-m.handshakes }()
			m.accept(c)
		}) {
			<-m.handshakes
			_ = c.Close()
			return false
		}
		return true
	})
}

// accept runs the acceptor's side of the handshake and hands the
// connection to its link.
func (m *Manager) accept(c net.Conn) {
	_ = c.SetDeadline(m.clock.Now().Add(m.opts.HandshakeTimeout))
	var kind [1]byte
	if _, err := io.ReadFull(c, kind[:]); err != nil || kind[0] != Kind {
		_ = c.Close()
		return
	}
	conn := c
	if m.cfg.TLS != nil {
		tc := tls.Server(c, m.cfg.TLS)
		ctx, cancel := context.WithTimeout(m.group.Context(), m.opts.HandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			m.log.Warn("peer: TLS handshake", "remote", c.RemoteAddr(), "err", err)
			_ = c.Close()
			return
		}
		conn = tc
	}
	br := bufio.NewReaderSize(conn, readBufferSize)
	typ, body, _, err := readFrame(br, nil, 4096)
	if err != nil || typ != frameHello {
		_ = conn.Close()
		return
	}
	h, err := decodeHello(body)
	if err != nil {
		_ = conn.Close()
		return
	}
	reject := ""
	var l *Link
	switch {
	case h.Version != protocolVersion:
		reject = fmt.Sprintf("protocol version %d, want %d", h.Version, protocolVersion)
	case h.To != m.cfg.NodeID:
		reject = fmt.Sprintf("this is node %q, not %q", m.cfg.NodeID, h.To)
	case h.From >= m.cfg.NodeID:
		reject = fmt.Sprintf("node %q must wait for %q to dial", h.From, m.cfg.NodeID)
	default:
		if l = m.Link(h.From); l == nil {
			reject = fmt.Sprintf("node %q is not a known peer of %q", h.From, m.cfg.NodeID)
		}
	}
	if reject != "" {
		m.log.Debug("peer: refusing connection", "remote", c.RemoteAddr(), "reason", reject)
		_, _ = conn.Write(appendReject(nil, reject))
		_ = conn.Close()
		return
	}
	if _, err := conn.Write(appendHelloAck(nil, helloAck{Version: protocolVersion, From: m.cfg.NodeID, Incarnation: m.incarnation})); err != nil {
		_ = conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	l.offerConn(accepted{conn: conn, br: br, incarnation: h.Incarnation})
}

// dial runs the dialer's side of the handshake.
func (m *Manager) dial(ctx context.Context, id, addr string) (accepted, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.HandshakeTimeout)
	defer cancel()
	c, err := m.cfg.Dial(ctx, addr)
	if err != nil {
		return accepted{}, fmt.Errorf("peer: dial %s at %s: %w", id, addr, err)
	}
	fail := func(err error) (accepted, error) {
		_ = c.Close()
		return accepted{}, fmt.Errorf("peer: handshake with %s at %s: %w", id, addr, err)
	}
	_ = c.SetDeadline(m.clock.Now().Add(m.opts.HandshakeTimeout))
	if _, err := c.Write([]byte{Kind}); err != nil {
		return fail(err)
	}
	conn := c
	if m.cfg.TLS != nil {
		cfg := m.cfg.TLS.Clone()
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		conn = tc
	}
	if _, err := conn.Write(appendHello(nil, hello{Version: protocolVersion, From: m.cfg.NodeID, To: id, Incarnation: m.incarnation})); err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(conn, readBufferSize)
	typ, body, _, err := readFrame(br, nil, 4096)
	if err != nil {
		return fail(err)
	}
	switch typ {
	case frameHelloAck:
		ack, err := decodeHelloAck(body)
		if err != nil {
			return fail(err)
		}
		if ack.From != id || ack.Version != protocolVersion {
			return fail(fmt.Errorf("answered by %q (protocol %d)", ack.From, ack.Version))
		}
		_ = conn.SetDeadline(time.Time{})
		return accepted{conn: conn, br: br, incarnation: ack.Incarnation}, nil
	case frameReject:
		reason, _ := decodeReject(body)
		return fail(fmt.Errorf("refused: %s", reason))
	}
	return fail(fmt.Errorf("%w: %s frame in handshake", ErrCorrupt, frameName(typ)))
}

// accepted is a connection past its handshake.
type accepted struct {
	conn        net.Conn
	br          *bufio.Reader
	incarnation uint64
}

// serveRequest runs the handler for a request in a goroutine of its own and
// queues the answer on the connection it came from.
func (m *Manager) serveRequest(l *Link, connN uint64, r request) {
	select {
	case m.requests <- struct{}{}:
	default:
		if r.ID != 0 {
			l.respond(connN, response{ID: r.ID, Status: statusError, Body: []byte("peer: too many requests")})
		}
		return
	}
	if !m.group.Go(func(ctx context.Context) {
		defer func() { <-m.requests }()
		out, err := m.cfg.Handler.Serve(ctx, l.id, r.Method, r.Body)
		if r.ID == 0 {
			return
		}
		if err != nil {
			l.respond(connN, response{ID: r.ID, Status: statusError, Body: []byte(err.Error())})
			return
		}
		l.respond(connN, response{ID: r.ID, Status: statusOK, Body: out})
	}) {
		<-m.requests
	}
}
