package meta

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/netx"
)

// Connection kinds: the first byte of every connection to the group.
const (
	kindRaft    byte = 'R'
	kindForward byte = 'F'
)

// helloTimeout bounds how long an accepted connection may take to send its
// kind byte.
const helloTimeout = 10 * time.Second

// raftLayer is the raft.StreamLayer over the group's listener: Accept yields
// the connections the accept loop classified as Raft's, Dial sends the kind
// byte first. It tracks its connections so that Close (called when Raft's
// transport closes) ends them and the goroutines reading them.
type raftLayer struct {
	addr     net.Addr
	dial     netx.DialFunc
	tls      *tls.Config   // nil: plain
	incoming chan net.Conn // from the accept loop; never closed
	done     chan struct{}
	once     sync.Once

	mu struct {
		sync.Mutex
		conns map[net.Conn]struct{}
	}
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func newRaftLayer(addr string, dial netx.DialFunc, tlsCfg *tls.Config) *raftLayer {
	l := &raftLayer{
		addr:     stringAddr(addr),
		dial:     dial,
		tls:      tlsCfg,
		incoming: make(chan net.Conn),
		done:     make(chan struct{}),
	}
	l.mu.conns = map[net.Conn]struct{}{}
	return l
}

// offer hands an accepted Raft connection to Accept; false once closed.
func (l *raftLayer) offer(ctx context.Context, c net.Conn) bool {
	select {
	case l.incoming <- c:
		return true
	case <-l.done:
	case <-ctx.Done():
	}
	return false
}

// Accept returns the next inbound Raft connection.
func (l *raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.incoming:
		return l.track(c)
	case <-l.done:
		return nil, fmt.Errorf("meta: raft stream layer: %w", net.ErrClosed)
	}
}

// Dial opens a Raft connection to address.
func (l *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.done:
		return nil, fmt.Errorf("meta: raft stream layer: %w", net.ErrClosed)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := l.dial(ctx, string(address))
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{kindRaft}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("meta: raft dial %s: %w", address, err)
	}
	if c, err = secure(ctx, c, l.tls, false); err != nil {
		return nil, fmt.Errorf("meta: raft dial %s: %w", address, err)
	}
	_ = c.SetDeadline(time.Time{})
	return l.track(c)
}

func (l *raftLayer) track(c net.Conn) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.conns == nil {
		_ = c.Close()
		return nil, fmt.Errorf("meta: raft stream layer: %w", net.ErrClosed)
	}
	tc := &trackedConn{Conn: c, layer: l}
	l.mu.conns[tc] = struct{}{}
	return tc, nil
}

func (l *raftLayer) forget(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.conns, c)
}

// Close stops Accept and closes every Raft connection.
func (l *raftLayer) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		conns := l.mu.conns
		l.mu.conns = nil
		l.mu.Unlock()
		for c := range conns {
			_ = c.(*trackedConn).Conn.Close()
		}
	})
	return nil
}

// Addr is the group address of this node.
func (l *raftLayer) Addr() net.Addr { return l.addr }

type trackedConn struct {
	net.Conn
	layer *raftLayer
}

func (c *trackedConn) Close() error {
	c.layer.forget(c)
	return c.Conn.Close()
}

type stringAddr string

func (a stringAddr) Network() string { return "meta" }
func (a stringAddr) String() string  { return string(a) }

// secure runs the TLS handshake on c after its kind byte, as the server
// for an accepted connection, when the group uses TLS (cfg not nil). On
// failure c is closed.
func secure(ctx context.Context, c net.Conn, cfg *tls.Config, server bool) (net.Conn, error) {
	if cfg == nil {
		return c, nil
	}
	var tc *tls.Conn
	if server {
		tc = tls.Server(c, cfg)
	} else {
		tc = tls.Client(c, cfg)
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("tls: %w", err)
	}
	return tc, nil
}

// acceptLoop classifies inbound connections until the listener closes.
func (m *Meta) acceptLoop(ctx context.Context) {
	netx.Accept(ctx, m.cfg.Listener, nil, m.logger.With("listener", "meta"), func(c net.Conn) bool {
		if !m.group.Go(func(ctx context.Context) { m.classify(ctx, c) }) {
			_ = c.Close()
			return false
		}
		return true
	})
}

// classify reads the kind byte and routes the connection.
func (m *Meta) classify(ctx context.Context, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	var kind [1]byte
	if _, err := io.ReadFull(c, kind[:]); err != nil {
		_ = c.Close()
		return
	}
	if kind[0] == kindRaft || kind[0] == kindForward {
		hctx, cancel := context.WithTimeout(ctx, helloTimeout)
		remote := c.RemoteAddr()
		var err error
		c, err = secure(hctx, c, m.cfg.TLS, true)
		cancel()
		if err != nil {
			m.logger.Warn("meta: refused a connection", "remote", remote, "err", err)
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	switch kind[0] {
	case kindRaft:
		if !m.layer.offer(ctx, c) {
			_ = c.Close()
		}
	case kindForward:
		m.serveForward(ctx, c)
	default:
		m.logger.Warn("meta: unknown connection kind", "kind", kind[0], "remote", c.RemoteAddr())
		_ = c.Close()
	}
}
