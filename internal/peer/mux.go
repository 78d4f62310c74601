package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/run"
)

// defaultSniffTimeout is how long a Mux waits for a connection's first
// byte unless told otherwise.
const defaultSniffTimeout = 10 * time.Second

// Mux shares one listener between protocols that each open their
// connections with a distinctive first byte: the node's peer address
// carries both the peer links (Kind) and the metadata group's connections.
// Every connection is handed to the sub-listener registered for its first
// byte, with that byte still unread; connections with an unknown first
// byte, or none within the sniff timeout, are closed.
type Mux struct {
	// immutable after NewMux
	ln      net.Listener
	timeout time.Duration
	log     *slog.Logger
	group   *run.Group // the accept loop and the connections being routed
	sem     chan struct{}

	once sync.Once

	mu struct {
		sync.Mutex
		routes  map[byte]*muxListener
		started bool
	}
}

// NewMux wraps ln; register sub-listeners with Listener, then call Start.
// The Mux owns ln. sniff bounds the wait for a connection's first byte
// (default 10 s).
func NewMux(ln net.Listener, sniff time.Duration, log *slog.Logger) *Mux {
	if sniff <= 0 {
		sniff = defaultSniffTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Mux{ln: ln, timeout: sniff, log: log, group: run.NewGroup(context.Background()), sem: make(chan struct{}, maxHandshakes)}
	m.mu.routes = map[byte]*muxListener{}
	return m
}

// Listener returns a listener for the connections whose first byte is one
// of kinds. It must be called before Start.
func (m *Mux) Listener(kinds ...byte) net.Listener {
	l := &muxListener{mux: m, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range kinds {
		m.mu.routes[k] = l
	}
	return l
}

// Start begins accepting.
func (m *Mux) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.started {
		return
	}
	m.mu.started = true
	m.group.Go(m.acceptLoop)
}

// Addr is the shared listener's address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Close closes the shared listener, ends every sub-listener's Accept and
// waits for the mux's goroutines. Connections already handed over belong to
// their sub-listener's owner.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		m.group.Stop()
		if cerr := m.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("peer: mux: %w", cerr)
		}
		m.group.Wait()
	})
	return err
}

func (m *Mux) acceptLoop(ctx context.Context) {
	netx.Accept(ctx, m.ln, nil, m.log.With("listener", "mux"), func(c net.Conn) bool {
		select {
		case m.sem <- struct{}{}:
		default:
			_ = c.Close()
			return true
		}
		if !m.group.Go(func(ctx context.Context) {
			defer func() { <-m.sem }()
			m.route(ctx, c)
		}) {
			<-m.sem
			_ = c.Close()
			return false
		}
		return true
	})
}

func (m *Mux) route(ctx context.Context, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(m.timeout))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	m.mu.Lock()
	l := m.mu.routes[b[0]]
	m.mu.Unlock()
	if l == nil {
		m.log.Debug("peer: mux: unknown connection kind", "kind", b[0], "remote", c.RemoteAddr())
		_ = c.Close()
		return
	}
	pc := &prefixConn{Conn: c, first: b[0], has: true}
	select {
	case l.conns <- pc:
	case <-l.closed:
		_ = c.Close()
	case <-ctx.Done():
		_ = c.Close()
	}
}

// muxListener is one protocol's view of a Mux.
type muxListener struct {
	mux    *Mux
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
	case <-l.mux.group.Context().Done():
	}
	return nil, fmt.Errorf("peer: mux listener: %w", net.ErrClosed)
}

// Close stops this sub-listener only; the Mux keeps serving the others.
func (l *muxListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *muxListener) Addr() net.Addr { return l.mux.ln.Addr() }

// prefixConn returns the sniffed first byte before the rest of the stream.
type prefixConn struct {
	net.Conn
	mu    sync.Mutex
	first byte
	has   bool
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	if c.has {
		c.has = false
		c.mu.Unlock()
		b[0] = c.first
		return 1, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(b)
}
