package netx

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
)

// Streams is the accepting half of a stream layer that shares a listener
// with others (the metadata group's and each placement group's Raft
// transport): the listener's owner classifies a connection and Offers it;
// the transport Accepts it. Streams also tracks every connection it handed
// out, accepted or dialled (Track), so that Close ends them, and with them
// the goroutines reading them.
type Streams struct {
	// immutable after NewStreams
	name     string        // for errors: "meta: raft", "replication: group g"
	incoming chan net.Conn // from Offer; never closed
	done     chan struct{}
	once     sync.Once

	mu struct {
		sync.Mutex
		conns map[*trackedConn]struct{} // nil once closed
	}
}

// NewStreams returns an open Streams; name prefixes its errors.
func NewStreams(name string) *Streams {
	s := &Streams{name: name, incoming: make(chan net.Conn), done: make(chan struct{})}
	s.mu.conns = map[*trackedConn]struct{}{}
	return s
}

// Offer hands an accepted connection to Accept. It reports false once the
// Streams or ctx closed; the caller then closes the connection.
func (s *Streams) Offer(ctx context.Context, c net.Conn) bool {
	select {
	case s.incoming <- c:
		return true
	case <-s.done:
	case <-ctx.Done():
	}
	return false
}

// Accept returns the next offered connection, tracked.
func (s *Streams) Accept() (net.Conn, error) {
	select {
	case c := <-s.incoming:
		return s.Track(c)
	case <-s.done:
		return nil, s.ErrClosed()
	}
}

// Done is closed by Close.
func (s *Streams) Done() <-chan struct{} { return s.done }

// ErrClosed is the error of an operation on a closed Streams; it wraps
// net.ErrClosed.
func (s *Streams) ErrClosed() error { return fmt.Errorf("%s: %w", s.name, net.ErrClosed) }

// Track returns c wrapped so that Close ends it; once the Streams is closed
// it closes c and fails.
func (s *Streams) Track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.conns == nil {
		_ = c.Close()
		return nil, s.ErrClosed()
	}
	tc := &trackedConn{Conn: c, s: s}
	s.mu.conns[tc] = struct{}{}
	return tc, nil
}

// Close stops Accept and closes every tracked connection. It is idempotent.
func (s *Streams) Close() {
	s.once.Do(func() {
		close(s.done)
		s.mu.Lock()
		conns := s.mu.conns
		s.mu.conns = nil
		s.mu.Unlock()
		for c := range conns {
			_ = c.Conn.Close()
		}
	})
}

type trackedConn struct {
	net.Conn
	s *Streams
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.mu.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// Secure runs the TLS handshake on c when cfg is set (nil: c is returned
// as is): as the server for an accepted connection, as the client for a
// dialled one. Cluster connections call it after their kind byte, which
// stays in the clear for the multiplexer. On failure c is closed.
func Secure(ctx context.Context, c net.Conn, cfg *tls.Config, server bool) (net.Conn, error) {
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
