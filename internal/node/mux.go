package node

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Protocol bytes: the first byte a node-to-node connection sends on the
// cluster address says which subsystem it is for. The metadata group writes
// its own ('R' for Raft, 'F' for forwarded requests) and reads it back.
const (
	protoGossip = 'G'
	protoPeer   = 'P'
)

// mux splits one TCP listener into virtual listeners by first byte.
type mux struct {
	ln     net.Listener
	routes map[byte]*subListener
	wg     sync.WaitGroup
}

func newMux(ln net.Listener) *mux { return &mux{ln: ln, routes: map[byte]*subListener{}} }

// route returns the listener receiving connections starting with any of bs.
// When keep is set the byte is left for the subsystem to read.
func (m *mux) route(keep bool, bs ...byte) net.Listener {
	s := &subListener{addr: m.ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{}), keep: keep}
	for _, b := range bs {
		m.routes[b] = s
	}
	return s
}

func (m *mux) serve() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			c, err := m.ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			go m.dispatch(c)
		}
	}()
}

func (m *mux) dispatch(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 64)
	b, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	s := m.routes[b[0]]
	if s == nil {
		c.Close()
		return
	}
	if !s.keep {
		_, _ = br.Discard(1)
	}
	_ = c.SetReadDeadline(time.Time{})
	select {
	case s.conns <- &peekedConn{Conn: c, r: br}:
	case <-s.done:
		c.Close()
	}
}

// close stops accepting and closes every virtual listener.
func (m *mux) close() {
	_ = m.ln.Close()
	m.wg.Wait()
	closed := map[*subListener]bool{}
	for _, s := range m.routes {
		if !closed[s] {
			closed[s] = true
			s.Close()
		}
	}
}

type subListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	keep  bool
}

func (s *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *subListener) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

func (s *subListener) Addr() net.Addr { return s.addr }

// peekedConn reads first what the mux buffered while peeking.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// dialProto dials addr and sends the protocol byte.
func dialProto(proto byte) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if _, err := c.Write([]byte{proto}); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}
