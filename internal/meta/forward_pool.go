package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/netx"
)

// The forward path keeps its connections to the leader: a forwarded
// request on a new connection costs a round trip more than on an open one
// (the dial), two more with TLS, and every forwarded metadata write (a
// migration's switch, a placement decision, a group's creation) paid it.
// A served forward connection answers requests one after another until it
// is idle for serveIdle or breaks.
const (
	// maxIdleForward bounds the idle connections kept to the leader. More
	// requests at once dial more connections; those beyond the bound are
	// closed when their request ends.
	maxIdleForward = 16
	// forwardIdle: an idle connection older than this is closed rather
	// than used. It is well under serveIdle, so the leader does not close
	// a connection just as a request is sent on it (which would make the
	// request's outcome unknown).
	forwardIdle = 30 * time.Second
	// serveIdle: the serving side closes a forward connection on which no
	// request arrived for this long.
	serveIdle = 2 * time.Minute
)

// fwdConn is one forward connection: raw is what was dialed (closed on
// cancellation), sec the same one after the TLS handshake (or raw).
type fwdConn struct {
	raw, sec net.Conn
	idle     time.Time // when it was last put back
}

// forwardPool holds the idle forward connections to one address, the
// leader's as last forwarded to. It is safe for concurrent use; a
// connection is used by one request at a time.
type forwardPool struct {
	mu     sync.Mutex
	addr   string
	idle   []*fwdConn // most recently used last
	closed bool
}

// get takes an idle connection to addr, or nil. Connections to another
// address (the leader changed), stale ones and ones the other side has
// closed are closed.
func (p *forwardPool) get(addr string, now time.Time) *fwdConn {
	for {
		c, drop := p.pop(addr, now)
		for _, d := range drop {
			_ = d.raw.Close()
		}
		if c == nil || open(c) {
			return c
		}
		_ = c.raw.Close()
	}
}

// pop takes the most recently used idle connection to addr that is not
// stale, and returns those to close.
func (p *forwardPool) pop(addr string, now time.Time) (c *fwdConn, drop []*fwdConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addr != addr {
		drop, p.idle, p.addr = p.idle, nil, addr
	}
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(c.idle) < forwardIdle {
			return c, drop
		}
		drop = append(drop, c)
	}
	return nil, drop
}

// open reports whether an idle connection is still open at the other end.
// A leader that stopped or restarted closed it while it sat idle; sending
// a request on it would make the request's outcome unknown (it was sent)
// where a new connection's dial would fail first and be retried. An idle
// connection receives nothing, so a byte waiting also rules it out.
func open(c *fwdConn) bool {
	if alive, ok := peekOpen(c.raw); ok {
		return alive
	}
	// Not a socket (memnet): a read whose deadline has passed reports what
	// has arrived (EOF) before the timeout.
	if err := c.raw.SetReadDeadline(time.Now()); err != nil {
		return false
	}
	var b [1]byte
	n, err := c.raw.Read(b[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	return c.raw.SetReadDeadline(time.Time{}) == nil
}

// put returns a connection after a request completed on it; it is closed
// instead when the pool is full or closed or addr is no longer the pool's.
func (p *forwardPool) put(addr string, c *fwdConn, now time.Time) {
	p.mu.Lock()
	if p.closed || p.addr != addr || len(p.idle) >= maxIdleForward {
		p.mu.Unlock()
		_ = c.raw.Close()
		return
	}
	c.idle = now
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// reset closes the idle connections (the leader changed or is unknown);
// close also refuses any put from then on.
func (p *forwardPool) reset(closing bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.addr = nil, ""
	if closing {
		p.closed = true
	}
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.raw.Close()
	}
}

// size returns the number of idle connections (tests).
func (p *forwardPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// dialForward opens a forward connection to addr: the kind byte, then the
// TLS handshake. Any failure here is errNotSent.
func (m *Meta) dialForward(ctx context.Context, addr string) (*fwdConn, error) {
	c, err := m.cfg.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", errNotSent, addr, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	if _, err := c.Write([]byte{kindForward}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: %s: %w", errNotSent, addr, err)
	}
	sc, err := netx.Secure(ctx, c, m.cfg.TLS, false) // c stays the raw connection, which closers hold
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: %s: %w", errNotSent, addr, err)
	}
	return &fwdConn{raw: c, sec: sc}, nil
}

// forward sends req to addr and returns the response, on an idle
// connection to addr when the pool has one. A request that could not be
// sent (dial or write failure) comes back as errNotSent, safe to retry; a
// failure after it was sent is ErrUnknownOutcome. pooled false uses a
// connection of its own, closed after the request (Join, which asks
// addresses that may not lead).
func (m *Meta) forward(ctx context.Context, addr string, req request) (response, error) {
	return m.forwardOn(ctx, addr, req, true)
}

func (m *Meta) forwardOn(ctx context.Context, addr string, req request, pooled bool) (response, error) {
	if err := ctx.Err(); err != nil {
		return response{}, fmt.Errorf("%w: %s: %w", errNotSent, addr, err)
	}
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(1, time.Until(d).Milliseconds())
	}
	var c *fwdConn
	if pooled {
		c = m.fwd.get(addr, time.Now())
	}
	if c == nil {
		var err error
		if c, err = m.dialForward(ctx, addr); err != nil {
			return response{}, err
		}
	}
	resp, err := exchange(ctx, c, req)
	if errors.Is(err, errClosedAfter) {
		return resp, nil
	}
	if err != nil {
		_ = c.raw.Close()
		if errors.Is(err, errNotSent) {
			return response{}, fmt.Errorf("%w: %s: %w", errNotSent, addr, err)
		}
		return response{}, fmt.Errorf("%w: no answer from %s: %w", ErrUnknownOutcome, addr, err)
	}
	if pooled {
		m.fwd.put(addr, c, time.Now())
	} else {
		_ = c.raw.Close()
	}
	return resp, nil
}

// exchange writes req on c and reads its response, within ctx. On success
// c is left with no deadline, ready for the next request. A failed write
// is errNotSent: the frame was not whole on the wire, and the serving side
// executes only whole frames.
func exchange(ctx context.Context, c *fwdConn, req request) (response, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.raw.Close() })
	d, _ := ctx.Deadline() // zero: none
	_ = c.raw.SetDeadline(d)
	if err := writeFrame(c.sec, req); err != nil {
		stop()
		return response{}, fmt.Errorf("%w: %w", errNotSent, err)
	}
	var resp response
	err := readFrame(c.sec, &resp)
	if !stop() && err == nil {
		// ctx ended just as the answer came: the connection is closed, the
		// answer is good.
		return resp, errClosedAfter
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return response{}, err
	}
	_ = c.raw.SetDeadline(time.Time{})
	return resp, nil
}

// errClosedAfter: the exchange succeeded but its connection was closed by
// the context's end; forwardOn does not pool it.
var errClosedAfter = errors.New("meta: forward connection closed after its answer")

// watchLeader closes the idle forward connections whenever this node sees
// the leader change or become unknown, so a request is not sent on a
// connection to a node that stopped leading (or restarted: its old
// connection would fail after the request was written, an unknown outcome
// where a new dial fails cleanly).
func (m *Meta) watchLeader(ctx context.Context) {
	ch := make(chan raft.Observation, 1)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	m.raft.RegisterObserver(obs)
	defer m.raft.DeregisterObserver(obs)
	for {
		select {
		case <-ch:
			m.fwd.reset(false)
		case <-ctx.Done():
			return
		}
	}
}
