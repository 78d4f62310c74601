package memnet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
)

// Errors returned by memnet, usually wrapped in a *net.OpError.
var (
	// ErrRefused: the dialled address has no listener, or its backlog is full.
	ErrRefused = errors.New("memnet: connection refused")
	// ErrReset: the stream was cut by a partition for longer than
	// Options.BreakAfter, or the peer closed it while this side was writing.
	ErrReset = errors.New("memnet: connection reset")
	// ErrAddrInUse: Listen or ListenPacket on an address already bound.
	ErrAddrInUse = errors.New("memnet: address already in use")
	// ErrTooLarge: a datagram larger than Options.MaxDatagram.
	ErrTooLarge = errors.New("memnet: message too long")
)

// Options tune a Network. The zero value is usable: every zero field takes
// the default named in its comment.
type Options struct {
	// Seed seeds the packet-loss random source (default 1).
	Seed uint64
	// DefaultRTT is the round-trip time between two different hosts that
	// have none configured (default 0). The same host talks to itself with
	// zero latency.
	DefaultRTT time.Duration
	// StreamBuffer bounds the bytes in flight plus unread per stream
	// direction (default 256 KiB).
	StreamBuffer int
	// PacketQueue bounds the datagrams waiting to be read per PacketConn
	// (default 1024); further datagrams are dropped.
	PacketQueue int
	// Backlog bounds the connections waiting in Accept per listener
	// (default 128); further dials are refused.
	Backlog int
	// BreakAfter is how long a stream may stall across a partition before it
	// is reset (default 10 s).
	BreakAfter time.Duration
	// MaxDatagram is the largest datagram WriteTo accepts (default 65507).
	MaxDatagram int
}

func (o Options) withDefaults() Options {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.StreamBuffer <= 0 {
		o.StreamBuffer = 256 << 10
	}
	if o.PacketQueue <= 0 {
		o.PacketQueue = 1024
	}
	if o.Backlog <= 0 {
		o.Backlog = 128
	}
	if o.BreakAfter <= 0 {
		o.BreakAfter = 10 * time.Second
	}
	if o.MaxDatagram <= 0 {
		o.MaxDatagram = 65507
	}
	return o
}

// pair is an ordered host pair.
type pair struct{ from, to string }

// link is an unordered host pair (a <= b).
type link struct{ a, b string }

func linkOf(a, b string) link {
	if b < a {
		a, b = b, a
	}
	return link{a, b}
}

// Network is one emulated network. Create it with New; Close releases every
// listener and connection on it.
type Network struct {
	opts Options // immutable after New

	// ctl serialises control operations (topology changes and their effect
	// on live streams). Taken before mu, never while holding mu.
	ctl sync.Mutex

	mu struct {
		sync.Mutex
		closed    bool
		oneway    map[pair]time.Duration
		loss      map[link]float64
		cut       map[pair]bool // traffic from pair.from to pair.to is cut
		isolated  map[string]bool
		frozen    map[string]bool       // hosts stalled by Stall
		held      map[string][]heldGram // datagrams to a stalled host, delivered at Resume
		listeners map[string]*Listener
		packets   map[string]*PacketConn
		streams   map[*stream]struct{}
		nextPort  map[string]int
		rng       *rand.Rand
	}
}

// New returns an empty network.
func New(opts Options) *Network {
	n := &Network{opts: opts.withDefaults()}
	n.mu.oneway = map[pair]time.Duration{}
	n.mu.loss = map[link]float64{}
	n.mu.cut = map[pair]bool{}
	n.mu.isolated = map[string]bool{}
	n.mu.frozen = map[string]bool{}
	n.mu.held = map[string][]heldGram{}
	n.mu.listeners = map[string]*Listener{}
	n.mu.packets = map[string]*PacketConn{}
	n.mu.streams = map[*stream]struct{}{}
	n.mu.nextPort = map[string]int{}
	n.mu.rng = rand.New(rand.NewPCG(n.opts.Seed, n.opts.Seed^0x9e3779b97f4a7c15))
	return n
}

// Addr is a memnet endpoint address.
type Addr struct {
	Net  string // "tcp" or "udp"
	Host string
	Port int
}

var _ net.Addr = Addr{}

// Network returns "tcp" for stream endpoints and "udp" for datagram ones.
func (a Addr) Network() string { return a.Net }

// String returns "host:port".
func (a Addr) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// parseAddr splits "host:port"; a bare host means port 0 when allowBare.
func parseAddr(network, s string, allowBare bool) (Addr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if !allowBare || s == "" {
			return Addr{}, fmt.Errorf("memnet: address %q: %w", s, err)
		}
		return Addr{Net: network, Host: s}, nil
	}
	if host == "" {
		return Addr{}, fmt.Errorf("memnet: address %q has no host", s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return Addr{}, fmt.Errorf("memnet: address %q: bad port", s)
	}
	return Addr{Net: network, Host: host, Port: p}, nil
}

// ephemeralLocked returns a port on host that no listener or packet conn
// uses, or 0 when every ephemeral port is taken.
func (n *Network) ephemeralLocked(host string) int {
	const first, last = 40000, 65535
	p := n.mu.nextPort[host]
	for range last - first + 1 {
		if p < first || p > last {
			p = first
		}
		candidate := p
		p++
		key := net.JoinHostPort(host, strconv.Itoa(candidate))
		_, l := n.mu.listeners[key]
		_, pc := n.mu.packets[key]
		if !l && !pc {
			n.mu.nextPort[host] = p
			return candidate
		}
	}
	return 0
}

// onewayLocked is the one-way latency from host a to host b.
func (n *Network) onewayLocked(a, b string) time.Duration {
	if a == b {
		return 0
	}
	if d, ok := n.mu.oneway[pair{a, b}]; ok {
		return d
	}
	return n.opts.DefaultRTT / 2
}

func (n *Network) oneway(a, b string) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.onewayLocked(a, b)
}

// reachableLocked reports whether traffic flows from host a to host b.
func (n *Network) reachableLocked(a, b string) bool {
	if a == b {
		return true
	}
	return !n.mu.isolated[a] && !n.mu.isolated[b] && !n.mu.cut[pair{a, b}]
}

// connectedLocked reports whether traffic flows both ways between hosts a
// and b, as a new stream's handshake needs.
func (n *Network) connectedLocked(a, b string) bool {
	return n.reachableLocked(a, b) && n.reachableLocked(b, a)
}

// RTT returns the round-trip time currently configured between two hosts.
func (n *Network) RTT(a, b string) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.onewayLocked(a, b) + n.onewayLocked(b, a)
}

// SetRTT sets the round-trip time between hosts a and b: each direction gets
// half of it. It applies to data written and datagrams sent from now on.
func (n *Network) SetRTT(a, b string, rtt time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.oneway[pair{a, b}] = rtt / 2
	n.mu.oneway[pair{b, a}] = rtt - rtt/2
}

// SetMatrix sets the round-trip time of every pair of hosts from a square
// matrix: rtt[i][j] is the RTT between hosts[i] and hosts[j], and host i
// reaches host j in rtt[i][j]/2. The diagonal is ignored.
func (n *Network) SetMatrix(hosts []string, rtt [][]time.Duration) error {
	if len(rtt) != len(hosts) {
		return fmt.Errorf("memnet: matrix has %d rows for %d hosts", len(rtt), len(hosts))
	}
	for i, row := range rtt {
		if len(row) != len(hosts) {
			return fmt.Errorf("memnet: matrix row %d has %d columns for %d hosts", i, len(row), len(hosts))
		}
		for j, d := range row {
			if i != j && d < 0 {
				return fmt.Errorf("memnet: negative RTT between %s and %s", hosts[i], hosts[j])
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range hosts {
		for j := range hosts {
			if i != j {
				n.mu.oneway[pair{hosts[i], hosts[j]}] = rtt[i][j] / 2
			}
		}
	}
	return nil
}

// SetLoss sets the probability, in [0, 1], that a datagram between hosts a
// and b (either direction) is lost. Streams are not affected.
func (n *Network) SetLoss(a, b string, p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.loss[linkOf(a, b)] = min(max(p, 0), 1)
}

// Partition cuts hosts a and b apart in both directions.
func (n *Network) Partition(a, b string) {
	n.control(func() {
		n.mu.cut[pair{a, b}] = true
		n.mu.cut[pair{b, a}] = true
	})
}

// CutOneWay cuts the traffic from host from to host to, and only that
// direction: datagrams from `from` to `to` are lost, streams between them
// stall in that direction (and are reset after Options.BreakAfter, as a TCP
// connection whose segments go unacknowledged), new streams between them
// cannot be opened (a handshake needs both directions), and traffic from
// `to` to `from` still flows.
func (n *Network) CutOneWay(from, to string) {
	n.control(func() { n.mu.cut[pair{from, to}] = true })
}

// Heal undoes Partition(a, b) and CutOneWay in either direction between a
// and b. Isolation of either host stays in force.
func (n *Network) Heal(a, b string) {
	n.control(func() {
		delete(n.mu.cut, pair{a, b})
		delete(n.mu.cut, pair{b, a})
	})
}

// Break resets every stream open between hosts a and b now, on both ends
// (ErrReset), as a connection dropped by a middlebox or a restarted
// router: nothing is cut, so new streams can be opened at once.
func (n *Network) Break(a, b string) {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	n.mu.Lock()
	var ss []*stream
	for s := range n.mu.streams {
		h0, h1 := s.addr[0].Host, s.addr[1].Host
		if (h0 == a && h1 == b) || (h0 == b && h1 == a) {
			ss = append(ss, s)
		}
	}
	n.mu.Unlock()
	for _, s := range ss {
		s.reset(ErrReset)
	}
}

// ResetHost resets every stream with an end on host now (ErrReset on both
// ends), its same-host streams included: what the peers of a killed
// process see when its kernel closes its sockets.
func (n *Network) ResetHost(host string) {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	n.mu.Lock()
	var ss []*stream
	for s := range n.mu.streams {
		if s.addr[0].Host == host || s.addr[1].Host == host {
			ss = append(ss, s)
		}
	}
	n.mu.Unlock()
	for _, s := range ss {
		s.reset(ErrReset)
	}
}

// Isolate cuts host from every other host, including hosts that appear later.
func (n *Network) Isolate(host string) {
	n.control(func() { n.mu.isolated[host] = true })
}

// Rejoin undoes Isolate(host). Partitions of single links stay in force.
func (n *Network) Rejoin(host string) {
	n.control(func() { delete(n.mu.isolated, host) })
}

// Stall freezes host as a stopped process (SIGSTOP): every stream with an
// end on it, its clients' on the same host included, stops delivering in
// both directions, and writers block once a direction's buffer is full, but
// no stream is reset however long the stall lasts (the kernel of a stopped
// process keeps its connections). New streams to or from it open and are
// frozen too. Datagrams it sends are dropped (a stopped process sends
// nothing); datagrams to it are held, up to Options.PacketQueue per host,
// and delivered at Resume. The code running on the host is not stopped:
// in-process it keeps its timers, which a real stop would freeze.
func (n *Network) Stall(host string) { n.freeze(host, true) }

// Resume undoes Stall(host): what was written meanwhile is delivered, one
// one-way latency after now at the earliest, and the held datagrams
// arrive.
func (n *Network) Resume(host string) { n.freeze(host, false) }

// Stalled reports whether host is stalled.
func (n *Network) Stalled(host string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.frozen[host]
}

func (n *Network) freeze(host string, on bool) {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	type effect struct {
		s      *stream
		frozen bool
		oneway [2]time.Duration
	}
	n.mu.Lock()
	if on {
		n.mu.frozen[host] = true
	} else {
		delete(n.mu.frozen, host)
	}
	var effects []effect
	for s := range n.mu.streams {
		h0, h1 := s.addr[0].Host, s.addr[1].Host
		if h0 != host && h1 != host {
			continue
		}
		effects = append(effects, effect{s: s, frozen: n.mu.frozen[h0] || n.mu.frozen[h1],
			oneway: [2]time.Duration{n.onewayLocked(h0, h1), n.onewayLocked(h1, h0)}})
	}
	var held []heldGram
	if !on {
		held = n.mu.held[host]
		delete(n.mu.held, host)
	}
	n.mu.Unlock()
	for _, e := range effects {
		e.s.setFrozen(e.frozen, e.oneway)
	}
	for _, h := range held {
		n.deliver(h.dst, h.d)
	}
}

// HealAll removes every partition and isolation.
func (n *Network) HealAll() {
	n.control(func() {
		clear(n.mu.cut)
		clear(n.mu.isolated)
	})
}

// control applies a topology change and then stalls or resumes the live
// streams whose reachability it changed.
func (n *Network) control(change func()) {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	type effect struct {
		s       *stream
		blocked [2]bool // direction i (what side i writes) is cut
		oneway  [2]time.Duration
	}
	n.mu.Lock()
	change()
	effects := make([]effect, 0, len(n.mu.streams))
	for s := range n.mu.streams {
		effects = append(effects, effect{
			s: s,
			blocked: [2]bool{
				!n.reachableLocked(s.addr[0].Host, s.addr[1].Host),
				!n.reachableLocked(s.addr[1].Host, s.addr[0].Host),
			},
			oneway: [2]time.Duration{
				n.onewayLocked(s.addr[0].Host, s.addr[1].Host),
				n.onewayLocked(s.addr[1].Host, s.addr[0].Host),
			},
		})
	}
	n.mu.Unlock()
	for _, e := range effects {
		e.s.setStalled(e.blocked, e.oneway)
	}
}

// dropLocked decides whether a datagram from a to b is lost.
func (n *Network) dropLocked(a, b string) bool {
	if !n.reachableLocked(a, b) {
		return true
	}
	if a == b {
		return false
	}
	p := n.mu.loss[linkOf(a, b)]
	return p > 0 && n.mu.rng.Float64() < p
}

// Close shuts the network down: every listener, packet conn and stream on it
// is closed, and later Listen, ListenPacket and Dial calls fail.
func (n *Network) Close() error {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.closed = true
	var (
		ls  []*Listener
		pcs []*PacketConn
		ss  []*stream
	)
	for _, l := range n.mu.listeners {
		ls = append(ls, l)
	}
	for _, pc := range n.mu.packets {
		pcs = append(pcs, pc)
	}
	for s := range n.mu.streams {
		ss = append(ss, s)
	}
	n.mu.Unlock()
	for _, l := range ls {
		_ = l.Close()
	}
	for _, pc := range pcs {
		_ = pc.Close()
	}
	for _, s := range ss {
		s.reset(net.ErrClosed)
	}
	return nil
}

func opError(op string, src, dst net.Addr, err error) error {
	return &net.OpError{Op: op, Net: "memnet", Source: src, Addr: dst, Err: err}
}

// Host is one host's view of the network: it listens on any address and
// dials from this host. It is what a node built in a test takes as its
// network (node.Options.Network), where production takes netx.Host.
type Host struct {
	n    *Network
	name string
}

// Host returns host name's view of the network.
func (n *Network) Host(name string) Host { return Host{n: n, name: name} }

// Listen listens for streams on addr.
func (h Host) Listen(addr string) (net.Listener, error) { return h.n.Listen(addr) }

// ListenPacket listens for datagrams on addr.
func (h Host) ListenPacket(addr string) (net.PacketConn, error) { return h.n.ListenPacket(addr) }

// Dial opens a stream from this host to addr.
func (h Host) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return h.n.Dial(ctx, h.name, addr)
}
