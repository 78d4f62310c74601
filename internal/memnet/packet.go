package memnet

import (
	"net"
	"os"
	"sync"
	"time"
)

type datagram struct {
	data []byte
	from Addr
}

// heldGram is a datagram waiting for its stalled receiver's host to resume.
type heldGram struct {
	dst Addr
	d   datagram
}

// PacketConn is a memnet datagram endpoint. It implements net.PacketConn.
type PacketConn struct {
	nw    *Network
	addr  Addr
	queue chan datagram // bounded; full means drop
	done  chan struct{}
	once  sync.Once

	mu struct {
		sync.Mutex
		rdl, wdl time.Time
		changed  chan struct{} // closed and replaced when a deadline changes
	}
}

var _ net.PacketConn = (*PacketConn)(nil)

// ListenPacket binds a datagram endpoint to "host:port"; port 0 picks a free
// port. Stream and datagram ports are separate name spaces, as TCP and UDP.
func (n *Network) ListenPacket(addr string) (net.PacketConn, error) {
	a, err := parseAddr("udp", addr, false)
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
	if _, ok := n.mu.packets[key]; ok {
		return nil, opError("listen", nil, a, ErrAddrInUse)
	}
	pc := &PacketConn{
		nw:    n,
		addr:  a,
		queue: make(chan datagram, n.opts.PacketQueue),
		done:  make(chan struct{}),
	}
	pc.mu.changed = make(chan struct{})
	n.mu.packets[key] = pc
	return pc, nil
}

// ReadFrom waits for the next datagram. A datagram longer than b is
// truncated to len(b), as with UDP.
func (pc *PacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		pc.mu.Lock()
		rdl, ch := pc.mu.rdl, pc.mu.changed
		pc.mu.Unlock()
		select {
		case <-pc.done:
			return 0, nil, opError("read", pc.addr, nil, net.ErrClosed)
		case d := <-pc.queue:
			return copy(b, d.data), d.from, nil
		default:
		}
		if !rdl.IsZero() && !time.Now().Before(rdl) {
			return 0, nil, opError("read", pc.addr, nil, os.ErrDeadlineExceeded)
		}
		if d, ok := pc.await(ch, rdl); ok {
			return copy(b, d.data), d.from, nil
		}
	}
}

// await waits for a datagram, or until the endpoint closes, ch closes or rdl
// passes (then ok is false and the caller re-checks its state).
func (pc *PacketConn) await(ch <-chan struct{}, rdl time.Time) (datagram, bool) {
	var timeout <-chan time.Time
	if !rdl.IsZero() {
		t := time.NewTimer(time.Until(rdl))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case d := <-pc.queue:
		return d, true
	case <-pc.done:
	case <-ch:
	case <-timeout:
	}
	return datagram{}, false
}

// WriteTo sends b to addr ("host:port"). It never blocks: a datagram that is
// lost, cut by a partition, or finds no receiver is dropped silently.
func (pc *PacketConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	dst, err := parseAddr("udp", addr.String(), false)
	if err != nil {
		return 0, opError("write", pc.addr, addr, err)
	}
	select {
	case <-pc.done:
		return 0, opError("write", pc.addr, addr, net.ErrClosed)
	default:
	}
	if len(b) > pc.nw.opts.MaxDatagram {
		return 0, opError("write", pc.addr, addr, ErrTooLarge)
	}
	pc.mu.Lock()
	wdl := pc.mu.wdl
	pc.mu.Unlock()
	if !wdl.IsZero() && !time.Now().Before(wdl) {
		return 0, opError("write", pc.addr, addr, os.ErrDeadlineExceeded)
	}
	n := pc.nw
	n.mu.Lock()
	drop := n.mu.closed || n.mu.frozen[pc.addr.Host] || n.dropLocked(pc.addr.Host, dst.Host)
	delay := n.onewayLocked(pc.addr.Host, dst.Host)
	n.mu.Unlock()
	if drop {
		return len(b), nil
	}
	d := datagram{data: append([]byte(nil), b...), from: pc.addr}
	if delay <= 0 {
		n.deliver(dst, d)
	} else {
		time.AfterFunc(delay, func() { n.deliver(dst, d) })
	}
	return len(b), nil
}

// deliver hands a datagram to its receiver if the path is still open.
func (n *Network) deliver(dst Addr, d datagram) {
	n.mu.Lock()
	if n.mu.frozen[dst.Host] && !n.mu.closed {
		// A stopped process's socket buffer holds what arrives.
		if q := n.mu.held[dst.Host]; len(q) < n.opts.PacketQueue {
			n.mu.held[dst.Host] = append(q, heldGram{dst: dst, d: d})
		}
		n.mu.Unlock()
		return
	}
	pc := n.mu.packets[dst.String()]
	ok := pc != nil && !n.mu.closed && n.reachableLocked(d.from.Host, dst.Host)
	n.mu.Unlock()
	if !ok {
		return
	}
	select {
	case pc.queue <- d:
	default: // receiver's queue full: dropped, as a UDP socket buffer would
	}
}

// Close closes the endpoint; datagrams sent to it afterwards are dropped.
func (pc *PacketConn) Close() error {
	first := false
	pc.once.Do(func() {
		first = true
		pc.nw.mu.Lock()
		if pc.nw.mu.packets[pc.addr.String()] == pc {
			delete(pc.nw.mu.packets, pc.addr.String())
		}
		pc.nw.mu.Unlock()
		close(pc.done)
	})
	if !first {
		return opError("close", pc.addr, nil, net.ErrClosed)
	}
	return nil
}

// LocalAddr returns the endpoint's address.
func (pc *PacketConn) LocalAddr() net.Addr { return pc.addr }

// SetDeadline sets the read and write deadlines.
func (pc *PacketConn) SetDeadline(t time.Time) error { return pc.setDeadlines(t, true, true) }

// SetReadDeadline sets the read deadline; zero means none.
func (pc *PacketConn) SetReadDeadline(t time.Time) error { return pc.setDeadlines(t, true, false) }

// SetWriteDeadline sets the write deadline; zero means none.
func (pc *PacketConn) SetWriteDeadline(t time.Time) error { return pc.setDeadlines(t, false, true) }

func (pc *PacketConn) setDeadlines(t time.Time, read, write bool) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if read {
		pc.mu.rdl = t
	}
	if write {
		pc.mu.wdl = t
	}
	close(pc.mu.changed)
	pc.mu.changed = make(chan struct{})
	return nil
}
