package listener

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// IPLimits bound what one source address may do. IPv6 clients are counted
// per /64 network, since one host commonly holds a whole /64.
type IPLimits struct {
	MaxConns    int  // simultaneous connections (0: unlimited)
	ConnectRate int  // new connections per second, in bursts of up to as many (0: unlimited)
	Loopback    bool // count loopback addresses too (by default the node's own host is trusted)
}

// Limit names reported to an IPLimiter's observer.
const (
	HitMaxConns    = "connections_per_ip"
	HitConnectRate = "connect_rate"
)

// IPLimiter applies IPLimits across every listener that shares it.
//
// A connection over MaxConns is closed as soon as it is accepted: nothing
// of it is read. A connection over ConnectRate is accepted but marked (see
// RateExceeded): the session reads its CONNECT and refuses it with CONNACK
// 0x9F (Connection Rate Exceeded), so a well-behaved client learns why; it
// still counts towards MaxConns while it lasts, which bounds what a flood
// of such connections can hold.
//
// Memory: one small entry per address with open connections, plus the
// addresses seen in the last second or so (an entry is kept until its
// token bucket has refilled, so closing connections does not reset the
// rate); stale entries are swept as the table grows.
type IPLimiter struct {
	lim   IPLimits
	clock clock.Clock
	onHit func(limit string)

	mu struct {
		sync.Mutex
		addrs     map[netip.Addr]*ipState
		nextSweep int
	}
}

type ipState struct {
	conns  int
	tokens float64
	last   time.Time
}

// NewIPLimiter returns a limiter; onHit (may be nil) is called with a Hit*
// name each time a limit refuses a connection.
func NewIPLimiter(lim IPLimits, clk clock.Clock, onHit func(limit string)) *IPLimiter {
	if onHit == nil {
		onHit = func(string) {}
	}
	l := &IPLimiter{lim: lim, clock: clk, onHit: onHit}
	l.mu.addrs = map[netip.Addr]*ipState{}
	l.mu.nextSweep = 1024
	return l
}

// key is the address a connection is counted under.
func key(a net.Addr) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr(), true
	}
	return ip, true
}

// admit decides on a new connection from remote.
func (l *IPLimiter) admit(remote net.Addr) (k netip.Addr, ok, rateExceeded bool) {
	k, known := key(remote)
	if !known || (!l.lim.Loopback && k.IsLoopback()) {
		return k, true, false // not an IP connection, or a trusted local one
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.mu.addrs[k]
	if st == nil {
		if len(l.mu.addrs) >= l.mu.nextSweep {
			l.sweepLocked(now)
		}
		st = &ipState{tokens: float64(l.lim.ConnectRate), last: now}
		l.mu.addrs[k] = st
	}
	if l.lim.MaxConns > 0 && st.conns >= l.lim.MaxConns {
		l.onHit(HitMaxConns)
		return k, false, false
	}
	st.conns++
	if r := float64(l.lim.ConnectRate); r > 0 {
		st.tokens = min(r, st.tokens+r*now.Sub(st.last).Seconds())
		st.last = now
		if st.tokens >= 1 {
			st.tokens--
		} else {
			rateExceeded = true
			l.onHit(HitConnectRate)
		}
	}
	return k, true, rateExceeded
}

func (l *IPLimiter) release(k netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.mu.addrs[k]; st != nil && st.conns > 0 {
		st.conns--
	}
}

// sweepLocked forgets addresses with no connection whose bucket is full.
func (l *IPLimiter) sweepLocked(now time.Time) {
	r := float64(l.lim.ConnectRate)
	for k, st := range l.mu.addrs {
		if st.conns == 0 && (r == 0 || st.tokens+r*now.Sub(st.last).Seconds() >= r) {
			delete(l.mu.addrs, k)
		}
	}
	l.mu.nextSweep = max(1024, 2*len(l.mu.addrs))
}

// Tracked is the number of addresses the limiter holds state for.
func (l *IPLimiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.addrs)
}

// limitListener applies an IPLimiter to the connections ln accepts.
type limitListener struct {
	net.Listener
	l *IPLimiter
}

func (ll limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		k, ok, rate := ll.l.admit(c.RemoteAddr())
		if !ok {
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: ll.l, key: k, rateExceeded: rate}, nil
	}
}

// limitedConn is an admitted connection; closing it frees its slot.
type limitedConn struct {
	net.Conn
	l            *IPLimiter
	key          netip.Addr
	rateExceeded bool
	once         sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.release(c.key) })
	return c.Conn.Close()
}

// NetConn returns the accepted connection.
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// PassThrough returns the accepted connection, to which this one passes
// bytes unchanged: the session may then read and write its socket directly.
func (c *limitedConn) PassThrough() net.Conn { return c.Conn }

// ConnectRateExceeded reports whether the connection came over the CONNECT
// rate of its address (the session refuses it with 0x9F).
func (c *limitedConn) ConnectRateExceeded() bool { return c.rateExceeded }

func setNoDelay(c net.Conn) {
	for range 4 {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
}
