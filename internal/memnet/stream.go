package memnet

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// segment is one write in flight: readable from at onwards.
type segment struct {
	data []byte
	at   time.Time
	fin  bool // end of stream; carries no data
}

// half is one direction of a stream.
type half struct {
	segs    []segment
	off     int       // bytes of segs[0] already read
	bytes   int       // data bytes queued (in flight plus unread)
	last    time.Time // arrival time of the newest segment, keeps order
	fin     bool      // the writer closed: a fin segment is queued
	rclosed bool      // the reader closed: writes fail with ErrReset
}

// endpoint is the per-side state of a stream.
type endpoint struct {
	closed bool
	rdl    time.Time // read deadline, zero for none
	wdl    time.Time // write deadline, zero for none
}

// stream is one connection. Side 0 dialled, side 1 accepted; dir[i] carries
// what side i writes.
type stream struct {
	nw    *Network
	addr  [2]Addr // addr[i] is side i's local address
	limit int     // bytes per direction

	mu struct {
		sync.Mutex
		dir     [2]half
		ep      [2]endpoint
		stalled [2]bool // direction i (what side i writes) is cut
		frozen  bool    // an end's host is stalled (Network.Stall): nothing is delivered, nothing resets
		err     error   // once set, the stream is reset and every call fails
		breaker *time.Timer
		changed chan struct{} // closed and replaced on every state change
	}
}

func newStream(nw *Network, dialer, acceptor Addr) *stream {
	s := &stream{nw: nw, addr: [2]Addr{dialer, acceptor}, limit: nw.opts.StreamBuffer}
	s.mu.changed = make(chan struct{})
	return s
}

// notifyLocked wakes every goroutine waiting on the stream.
func (s *stream) notifyLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// wait blocks until ch is closed or, if wake is not zero, until wake.
func wait(ch <-chan struct{}, wake time.Time) {
	if wake.IsZero() {
		<-ch
		return
	}
	t := time.NewTimer(time.Until(wake))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// setStalled stops or resumes delivery in each direction after a topology
// change: blocked[i] and oneway[i] are the state and the latency of
// direction i. A stream stalled in either direction is reset after
// BreakAfter unless it heals first.
func (s *stream) setStalled(blocked [2]bool, oneway [2]time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil || s.mu.stalled == blocked {
		return
	}
	now := time.Now()
	for i := range s.mu.dir {
		if s.mu.stalled[i] && !blocked[i] {
			h := &s.mu.dir[i]
			floor := now.Add(oneway[i])
			for j := range h.segs {
				if h.segs[j].at.Before(floor) {
					h.segs[j].at = floor
				}
			}
			if h.last.Before(floor) && len(h.segs) > 0 {
				h.last = floor
			}
		}
	}
	s.mu.stalled = blocked
	anyBlocked := blocked[0] || blocked[1]
	switch {
	case anyBlocked && s.mu.breaker == nil:
		s.mu.breaker = time.AfterFunc(s.nw.opts.BreakAfter, func() { s.reset(ErrReset) })
	case !anyBlocked && s.mu.breaker != nil:
		s.mu.breaker.Stop()
		s.mu.breaker = nil
	}
	s.notifyLocked()
}

// setFrozen stops or resumes delivery in both directions for a stalled
// host (Network.Stall, Resume). Unlike a cut, a frozen stream is never
// reset: a stopped process's peer keeps its connection. On resume what was
// written meanwhile arrives one one-way latency later at the earliest.
func (s *stream) setFrozen(frozen bool, oneway [2]time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil || s.mu.frozen == frozen {
		return
	}
	if !frozen {
		now := time.Now()
		for i := range s.mu.dir {
			h := &s.mu.dir[i]
			floor := now.Add(oneway[i])
			for j := range h.segs {
				if h.segs[j].at.Before(floor) {
					h.segs[j].at = floor
				}
			}
			if h.last.Before(floor) && len(h.segs) > 0 {
				h.last = floor
			}
		}
	}
	s.mu.frozen = frozen
	s.notifyLocked()
}

// reset fails the stream on both sides with err.
func (s *stream) reset(err error) {
	s.mu.Lock()
	if s.mu.err == nil {
		s.mu.err = err
		if s.mu.breaker != nil {
			s.mu.breaker.Stop()
		}
		for i := range s.mu.dir {
			s.mu.dir[i].segs = nil
			s.mu.dir[i].bytes = 0
		}
		s.notifyLocked()
	}
	s.mu.Unlock()
	s.nw.forget(s)
}

func (n *Network) forget(s *stream) {
	n.mu.Lock()
	delete(n.mu.streams, s)
	n.mu.Unlock()
}

// Conn is one end of a memnet stream. It implements net.Conn.
type Conn struct {
	s    *stream
	side int
}

var _ net.Conn = (*Conn)(nil)

func (c *Conn) opErr(op string, err error) error {
	return opError(op, c.s.addr[c.side], c.s.addr[1-c.side], err)
}

// Read reads data that has arrived. It blocks until data arrives, the peer
// closes (io.EOF), the read deadline passes, or the stream fails.
func (c *Conn) Read(b []byte) (int, error) {
	s := c.s
	for {
		s.mu.Lock()
		ep := &s.mu.ep[c.side]
		if ep.closed {
			s.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		}
		if s.mu.err != nil {
			err := s.mu.err
			s.mu.Unlock()
			return 0, c.opErr("read", err)
		}
		in := &s.mu.dir[1-c.side]
		stalled := s.mu.stalled[1-c.side] || s.mu.frozen
		now := time.Now()
		n := 0
		for !stalled && len(in.segs) > 0 && !in.segs[0].at.After(now) && n < len(b) {
			seg := &in.segs[0]
			if seg.fin {
				break
			}
			k := copy(b[n:], seg.data[in.off:])
			n += k
			in.off += k
			in.bytes -= k
			if in.off == len(seg.data) {
				in.segs[0] = segment{}
				in.segs = in.segs[1:]
				in.off = 0
			}
		}
		if n > 0 || len(b) == 0 {
			if n > 0 {
				s.notifyLocked() // room for the writer
			}
			s.mu.Unlock()
			return n, nil
		}
		due := !stalled && len(in.segs) > 0 && !in.segs[0].at.After(now)
		if due && in.segs[0].fin {
			s.mu.Unlock()
			return 0, io.EOF
		}
		if !ep.rdl.IsZero() && !now.Before(ep.rdl) {
			s.mu.Unlock()
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		wake := ep.rdl
		if !stalled && len(in.segs) > 0 {
			wake = earliest(wake, in.segs[0].at)
		}
		ch := s.mu.changed
		s.mu.Unlock()
		wait(ch, wake)
	}
}

// Write queues b for delivery after the one-way latency. It blocks while the
// direction's buffer is full, until the write deadline passes or the stream
// fails; it returns the bytes queued so far with the error.
func (c *Conn) Write(b []byte) (int, error) {
	s := c.s
	total := 0
	for {
		oneway := s.nw.oneway(s.addr[c.side].Host, s.addr[1-c.side].Host)
		s.mu.Lock()
		ep := &s.mu.ep[c.side]
		out := &s.mu.dir[c.side]
		switch {
		case ep.closed:
			s.mu.Unlock()
			return total, c.opErr("write", net.ErrClosed)
		case s.mu.err != nil:
			err := s.mu.err
			s.mu.Unlock()
			return total, c.opErr("write", err)
		case out.rclosed:
			s.mu.Unlock()
			return total, c.opErr("write", ErrReset)
		case total == len(b):
			s.mu.Unlock()
			return total, nil
		}
		now := time.Now()
		if !ep.wdl.IsZero() && !now.Before(ep.wdl) {
			s.mu.Unlock()
			return total, c.opErr("write", os.ErrDeadlineExceeded)
		}
		if room := s.limit - out.bytes; room > 0 {
			k := min(room, len(b)-total)
			data := make([]byte, k)
			copy(data, b[total:total+k])
			out.push(segment{data: data, at: now.Add(oneway)})
			out.bytes += k
			total += k
			s.notifyLocked()
			s.mu.Unlock()
			continue
		}
		ch := s.mu.changed
		wdl := ep.wdl
		s.mu.Unlock()
		wait(ch, wdl)
	}
}

// push appends a segment, never letting it arrive before an earlier one.
func (h *half) push(seg segment) {
	if seg.at.Before(h.last) {
		seg.at = h.last
	}
	h.last = seg.at
	h.segs = append(h.segs, seg)
}

// Close closes this end. The peer reads the data already written and then
// io.EOF; its later writes fail with ErrReset.
func (c *Conn) Close() error {
	s := c.s
	oneway := s.nw.oneway(s.addr[c.side].Host, s.addr[1-c.side].Host)
	s.mu.Lock()
	ep := &s.mu.ep[c.side]
	if ep.closed {
		s.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	ep.closed = true
	out := &s.mu.dir[c.side]
	if !out.fin && s.mu.err == nil {
		out.fin = true
		out.push(segment{fin: true, at: time.Now().Add(oneway)})
	}
	in := &s.mu.dir[1-c.side]
	in.rclosed = true
	in.segs, in.bytes, in.off = nil, 0, 0
	both := s.mu.ep[1-c.side].closed
	s.notifyLocked()
	s.mu.Unlock()
	if both {
		s.nw.forget(s)
	}
	return nil
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.s.addr[c.side] }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.s.addr[1-c.side] }

// SetDeadline sets both the read and the write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	return c.setDeadlines(t, true, true)
}

// SetReadDeadline sets the read deadline; zero means none.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.setDeadlines(t, true, false) }

// SetWriteDeadline sets the write deadline; zero means none.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.setDeadlines(t, false, true) }

func (c *Conn) setDeadlines(t time.Time, read, write bool) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ep := &s.mu.ep[c.side]
	if ep.closed {
		return c.opErr("set deadline", net.ErrClosed)
	}
	if read {
		ep.rdl = t
	}
	if write {
		ep.wdl = t
	}
	s.notifyLocked()
	return nil
}

// Listener accepts memnet streams on one address. It implements net.Listener.
type Listener struct {
	nw      *Network
	addr    Addr
	backlog chan *Conn
	done    chan struct{}
	once    sync.Once
}

var _ net.Listener = (*Listener)(nil)

// Listen binds a stream listener to "host:port"; port 0 picks a free port.
func (n *Network) Listen(addr string) (net.Listener, error) {
	a, err := parseAddr("tcp", addr, false)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return nil, opError("listen", nil, a, net.ErrClosed)
	}
	if a.Port == 0 {
		if a.Port = n.ephemeralLocked(a.Host); a.Port == 0 {
			return nil, opError("listen", nil, a, ErrAddrInUse)
		}
	}
	key := a.String()
	if _, ok := n.mu.listeners[key]; ok {
		return nil, opError("listen", nil, a, ErrAddrInUse)
	}
	l := &Listener{nw: n, addr: a, backlog: make(chan *Conn, n.opts.Backlog), done: make(chan struct{})}
	n.mu.listeners[key] = l
	return l, nil
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.backlog:
		return c, nil
	case <-l.done:
		return nil, opError("accept", nil, l.addr, net.ErrClosed)
	}
}

// Close stops the listener; pending and later dials are refused.
func (l *Listener) Close() error {
	first := false
	l.once.Do(func() {
		first = true
		l.nw.mu.Lock()
		if l.nw.mu.listeners[l.addr.String()] == l {
			delete(l.nw.mu.listeners, l.addr.String())
		}
		l.nw.mu.Unlock()
		close(l.done)
	})
	if !first {
		return opError("close", nil, l.addr, net.ErrClosed)
	}
	for {
		select {
		case c := <-l.backlog:
			c.s.reset(ErrReset)
		default:
			return nil
		}
	}
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

// Dial opens a stream from host from (a bare host gets an ephemeral port, or
// "host:port") to the listener at to. It takes one round trip. Across a
// partition it blocks until ctx ends, as a connect whose SYNs are lost.
func (n *Network) Dial(ctx context.Context, from, to string) (net.Conn, error) {
	src, err := parseAddr("tcp", from, true)
	if err != nil {
		return nil, err
	}
	dst, err := parseAddr("tcp", to, false)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil, opError("dial", src, dst, net.ErrClosed)
	}
	if src.Port == 0 {
		src.Port = n.ephemeralLocked(src.Host)
	}
	there := n.onewayLocked(src.Host, dst.Host)
	back := n.onewayLocked(dst.Host, src.Host)
	n.mu.Unlock()

	if err := sleepCtx(ctx, there); err != nil {
		return nil, opError("dial", src, dst, err)
	}
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil, opError("dial", src, dst, net.ErrClosed)
	}
	if !n.connectedLocked(src.Host, dst.Host) {
		n.mu.Unlock()
		<-ctx.Done()
		return nil, opError("dial", src, dst, ctx.Err())
	}
	var c *Conn
	if l := n.mu.listeners[dst.String()]; l != nil {
		s := newStream(n, src, dst)
		s.mu.frozen = n.mu.frozen[src.Host] || n.mu.frozen[dst.Host] // not yet shared: no lock needed
		select {
		case l.backlog <- &Conn{s: s, side: 1}:
			n.mu.streams[s] = struct{}{}
			c = &Conn{s: s, side: 0}
		default:
		}
	}
	n.mu.Unlock()
	if err := sleepCtx(ctx, back); err != nil {
		if c != nil {
			c.s.reset(ErrReset)
		}
		return nil, opError("dial", src, dst, err)
	}
	if c == nil {
		return nil, opError("dial", src, dst, ErrRefused)
	}
	return c, nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DialFrom returns a dial function for host: each call is Dial(ctx, host,
// to). It is a netx.DialFunc.
func (n *Network) DialFrom(host string) func(ctx context.Context, to string) (net.Conn, error) {
	return func(ctx context.Context, to string) (net.Conn, error) { return n.Dial(ctx, host, to) }
}
