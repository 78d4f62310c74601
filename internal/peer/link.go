package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/wire"
)

// ErrLinkDown is returned by a call whose connection ended before the
// answer came. The request may or may not have been served.
var ErrLinkDown = errors.New("peer: link down")

// ErrRemote wraps an error returned by the peer's handler.
var ErrRemote = errors.New("peer: remote error")

// errOverflow ends a connection whose control queue overflowed.
var errOverflow = errors.New("peer: control queue overflow")

// Link is the connection to one peer, re-established whenever it fails, and
// its queues. The link's outbox (this node's acknowledged stream to the
// peer, outbox.go) outlives connections and paths: its messages go on this
// link's connection while it is usable, through a transit node while it is
// not (path.go). The control queue (retained updates, requests, responses)
// and the transit queue (frames passing through this node to the peer)
// belong to one connection and are dropped with it.
type Link struct {
	// immutable after newLink
	mgr    *Manager
	id     string
	dials  bool // this node dials (its id is the smaller)
	lm     *linkMetrics
	ctx    context.Context // ends when the link is removed
	cancel context.CancelFunc
	wake   chan struct{} // cap 1: the writer has something to do
	offer  chan accepted // acceptor side: connections past their handshake
	done   chan struct{} // closed when run returns

	up       atomic.Bool
	lastRecv atomic.Int64 // clock time (UnixNano) of the last frame read on the connection
	busy     atomic.Bool  // the reader is handing a frame to the handler (a slow handler is not a silent peer)
	path     atomic.Int32 // pathNone, pathDirect or pathTransit: how the outbox reaches the peer

	mu struct {
		sync.Mutex
		addr         string
		closed       bool
		out          outbox
		via          *Link         // the link whose writer sends out: this one, a transit node's, or nil (no path)
		viaConn      uint64        // via's connection when it was chosen: a new one means sending again
		progress     time.Time     // when out was last acknowledged further, or rewound
		space        chan struct{} // closed when the outbox frees room or loses its path
		connN        uint64        // current connection's number, 0 while down
		nconns       uint64
		upCh         chan struct{} // closed while a connection is up
		ctrl         [][]byte      // encoded frames for connection connN
		ctrlBytes    int
		overflow     bool
		transit      [][]byte // transit frames for connection connN
		transitBytes int
		sync         [][]byte // retained messages still to send on connection connN
		nextID       uint64
		pending      map[uint64]chan response
		reach        *reachSets // what the peer announced on connection connN; nil: nothing yet
	}
}

// reachSets is a peer's reach announcement; it is never modified once
// built (a new announcement replaces it), so it may be read without the
// link's lock once taken from it.
type reachSets struct {
	heard, sends map[string]bool
}

func newLink(m *Manager, id, addr string) *Link {
	l := &Link{
		mgr: m, id: id, dials: m.cfg.NodeID < id, lm: m.metrics.forPeer(id),
		wake: make(chan struct{}, 1), offer: make(chan accepted), done: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(m.group.Context())
	l.mu.addr = addr
	l.mu.upCh = make(chan struct{})
	l.mu.pending = map[uint64]chan response{}
	l.mu.out = newOutbox(m.incarnation, m.gens.Add(1))
	return l
}

// Node returns the peer's node id.
func (l *Link) Node() string { return l.id }

// Up reports whether a connection is established.
func (l *Link) Up() bool { return l.up.Load() }

func (l *Link) setAddr(addr string) {
	l.mu.Lock()
	l.mu.addr = addr
	l.mu.Unlock()
}

func (l *Link) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// stop ends the link and waits for its goroutine; the outbox's messages
// (waiting or unacknowledged) are dropped and counted.
func (l *Link) stop() {
	l.mu.Lock()
	l.mu.closed = true
	l.mu.Unlock()
	l.cancel()
	<-l.done
	l.mu.Lock()
	n := l.mu.out.clear()
	l.mu.via = nil
	l.freeSpaceLocked()
	l.mu.Unlock()
	l.path.Store(pathNone)
	l.lm.dropped[DropRemoved].Add(float64(n))
	l.lm.unacked.Set(0)
	l.lm.queueMessages.Set(0)
	l.lm.queueBytes.Set(0)
}

// freeSpaceLocked wakes the QoS 1/2 publishers waiting for room.
func (l *Link) freeSpaceLocked() {
	if l.mu.space != nil {
		close(l.mu.space)
		l.mu.space = nil
	}
}

func (l *Link) offerConn(a accepted) {
	select {
	case l.offer <- a:
	case <-l.ctx.Done():
		_ = a.conn.Close()
	}
}

// Publish queues a forwarded message in the outbox. The overflow policy,
// when the outbox (waiting plus unacknowledged messages) is at
// QueueMessages or QueueBytes: the oldest waiting QoS 0 message is dropped
// to make room; if there is none, a QoS 0 message is dropped, and a QoS 1/2
// message waits up to BlockTimeout for room while the peer has a path
// (back-pressure on its publisher), or is dropped at once while it has
// none. Every drop is counted by reason.
func (l *Link) Publish(p *Publish) {
	size := p.size()
	opts := &l.mgr.opts
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		l.mu.Lock()
		if l.mu.closed {
			l.mu.Unlock()
			l.lm.dropped[DropRemoved].Inc()
			return
		}
		o := &l.mu.out
		for o.full(opts.QueueMessages, opts.QueueBytes, size) && o.dropOldestQoS0() {
			l.lm.dropped[DropQueueFull].Inc()
		}
		if !o.full(opts.QueueMessages, opts.QueueBytes, size) {
			o.push(p)
			live, bytes, via := o.live(), o.bytes(), l.mu.via
			l.mu.Unlock()
			l.lm.queueMessages.Set(float64(live))
			l.lm.queueBytes.Set(float64(bytes))
			if via != nil {
				via.poke()
			}
			return
		}
		if p.QoS == 0 {
			l.mu.Unlock()
			l.lm.dropped[DropQueueFull].Inc()
			return
		}
		if l.mu.via == nil {
			l.mu.Unlock()
			l.lm.dropped[DropLinkDown].Inc()
			return
		}
		if l.mu.space == nil {
			l.mu.space = make(chan struct{})
		}
		space := l.mu.space
		l.mu.Unlock()
		if timer == nil {
			timer = l.mgr.clock.NewTimer(opts.BlockTimeout)
		}
		select {
		case <-space:
		case <-timer.C():
			l.lm.dropped[DropBlocked].Inc()
			return
		case <-l.ctx.Done():
			l.lm.dropped[DropRemoved].Inc()
			return
		}
	}
}

// SendRetained sends one retained update (a message.Append encoding) if
// the peer can be reached: on the link's connection if it is connected,
// and through the transit node as well while the connection is not usable.
// It reports whether it was queued on either. A link that is down gets a
// full sync when it reconnects (see SyncRetained), which makes up for an
// update lost on the way.
func (l *Link) SendRetained(msg []byte) bool {
	direct := l.enqueue(0, appendRetainedBatch(nil, [][]byte{msg}))
	if l.path.Load() != pathTransit {
		return direct
	}
	l.mu.Lock()
	via := l.mu.via
	l.mu.Unlock()
	if via == nil || via == l {
		return direct
	}
	f, at := beginTransit(nil, transitHeader{From: l.mgr.cfg.NodeID, To: l.id, Type: frameRetained})
	f = binary.AppendUvarint(f, 1)
	f = wire.AppendBytes(f, msg)
	return via.enqueueTransit(endFrame(f, at)) || direct
}

// enqueueTransit queues a transit frame on the current connection, within
// TransitBytes; it reports whether it was queued.
func (l *Link) enqueueTransit(frame []byte) bool {
	l.mu.Lock()
	switch {
	case l.mu.connN == 0:
		l.mu.Unlock()
		l.lm.transitDropped[TransitNoLink].Inc()
		return false
	case len(l.mu.transit) > 0 && l.mu.transitBytes+len(frame) > l.mgr.opts.TransitBytes:
		l.mu.Unlock()
		l.lm.transitDropped[TransitQueueFull].Inc()
		return false
	}
	l.mu.transit = append(l.mu.transit, frame)
	l.mu.transitBytes += len(frame)
	l.mu.Unlock()
	l.poke()
	return true
}

// SyncRetained sets the retained messages to send on the connection that
// just came up, after anything queued before; the writer sends them in
// batches when its control queue is empty. Call it from Handler.LinkUp.
func (l *Link) SyncRetained(msgs [][]byte) {
	l.mu.Lock()
	if l.mu.connN != 0 {
		l.mu.sync = msgs
	}
	l.mu.Unlock()
	l.poke()
}

// enqueue queues a control frame on connection connN (0: the current one)
// and reports whether it was queued.
func (l *Link) enqueue(connN uint64, frame []byte) bool {
	l.mu.Lock()
	if l.mu.connN == 0 || (connN != 0 && connN != l.mu.connN) {
		l.mu.Unlock()
		return false
	}
	ok := l.enqueueLocked(frame)
	l.mu.Unlock()
	l.poke()
	return ok
}

func (l *Link) enqueueLocked(frame []byte) bool {
	if l.mu.overflow {
		return false
	}
	if len(l.mu.ctrl) > 0 && l.mu.ctrlBytes+len(frame) > l.mgr.opts.ControlBytes {
		l.mu.overflow = true
		return false
	}
	l.mu.ctrl = append(l.mu.ctrl, frame)
	l.mu.ctrlBytes += len(frame)
	return true
}

func (l *Link) respond(connN uint64, r response) {
	l.enqueue(connN, appendResponse(nil, r))
}

// Call sends a request and waits for its answer. It waits for the link to
// be connected first. It fails with ErrLinkDown if the connection ends
// before the answer (the request may have been served), with an error
// wrapping ErrRemote if the peer's handler failed, or with ctx's error.
func (l *Link) Call(ctx context.Context, method byte, body []byte) ([]byte, error) {
	var ch chan response
	var id uint64
	for {
		l.mu.Lock()
		if l.mu.closed {
			l.mu.Unlock()
			return nil, fmt.Errorf("peer: call to %s: %w", l.id, ErrClosed)
		}
		if l.mu.connN != 0 {
			l.mu.nextID++
			id = l.mu.nextID
			ch = make(chan response, 1)
			if !l.enqueueLocked(appendRequest(nil, request{ID: id, Method: method, Body: body})) {
				l.mu.Unlock()
				return nil, fmt.Errorf("peer: call to %s: %w", l.id, errOverflow)
			}
			l.mu.pending[id] = ch
			l.mu.Unlock()
			l.poke()
			break
		}
		upCh := l.mu.upCh
		l.mu.Unlock()
		select {
		case <-upCh:
		case <-ctx.Done():
			return nil, fmt.Errorf("peer: call to %s (not connected): %w", l.id, ctx.Err())
		case <-l.ctx.Done():
			return nil, fmt.Errorf("peer: call to %s: %w", l.id, ErrClosed)
		}
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("peer: call to %s: %w", l.id, ErrLinkDown)
		}
		if r.Status != statusOK {
			return nil, fmt.Errorf("%w: %s: %s", ErrRemote, l.id, r.Body)
		}
		return r.Body, nil
	case <-ctx.Done():
		l.mu.Lock()
		delete(l.mu.pending, id)
		l.mu.Unlock()
		return nil, fmt.Errorf("peer: call to %s: %w", l.id, ctx.Err())
	}
}

// Notify sends a request whose answer is not wanted, if the link is
// connected; it reports whether it was queued.
func (l *Link) Notify(method byte, body []byte) bool {
	return l.enqueue(0, appendRequest(nil, request{Method: method, Body: body}))
}

// run connects (dialling with backoff, or taking what the acceptor hands
// over) and serves connections until the link is removed.
func (l *Link) run() {
	defer close(l.done)
	attempt := 0
	connected := false
	var next *accepted
	for l.ctx.Err() == nil {
		var a accepted
		switch {
		case next != nil:
			a, next = *next, nil
		case l.dials:
			if attempt > 0 {
				t := l.mgr.clock.NewTimer(l.mgr.backoff(attempt))
				select {
				case <-t.C():
				case <-l.ctx.Done():
					t.Stop()
					return
				}
			}
			attempt++
			l.mu.Lock()
			addr := l.mu.addr
			l.mu.Unlock()
			var err error
			if a, err = l.mgr.dial(l.ctx, l.id, addr); err != nil {
				l.mgr.log.Debug("peer: dial failed", "peer", l.id, "attempt", attempt, "err", err)
				continue
			}
		default:
			select {
			case a = <-l.offer:
			case <-l.ctx.Done():
				return
			}
		}
		if connected {
			l.lm.reconnects.Inc()
		}
		connected = true
		attempt = 1
		next = l.serve(a)
	}
	if next != nil {
		_ = next.conn.Close()
	}
}

// conn is one connection to the peer: the state its reader and writer
// share while it lasts.
type conn struct {
	n          uint64
	nc         net.Conn
	br         *bufio.Reader
	readerDone chan error // cap 1
}

// serve runs one connection until it fails, the link is removed, or (on
// the acceptor's side) a newer connection from the peer replaces it, which
// it returns.
func (l *Link) serve(a accepted) *accepted {
	m := l.mgr
	l.mu.Lock()
	l.mu.nconns++
	c := &conn{n: l.mu.nconns, nc: a.conn, br: a.br, readerDone: make(chan error, 1)}
	l.mu.connN = c.n
	l.mu.ctrl, l.mu.ctrlBytes, l.mu.overflow, l.mu.sync = nil, 0, false, nil
	l.mu.transit, l.mu.transitBytes, l.mu.reach = nil, 0, nil
	close(l.mu.upCh)
	l.mu.Unlock()
	l.lastRecv.Store(m.clock.Now().UnixNano())
	if lost := m.origins.observe(l.id, a.incarnation); lost > 0 {
		m.countLost(l.id, lost)
	}
	m.reroute() // the outbox's path, before Up says the link is up
	l.up.Store(true)
	l.lm.up.Set(1)
	m.log.Debug("peer: link up", "peer", l.id, "conn", c.n)
	m.cfg.Handler.LinkUp(l)

	go func() { c.readerDone <- l.readLoop(c) }()
	next, err := l.writeLoop(c)
	_ = c.nc.Close()
	rerr := <-c.readerDone
	if err == nil {
		err = rerr
	}

	l.mu.Lock()
	l.mu.connN = 0
	l.mu.upCh = make(chan struct{})
	l.mu.ctrl, l.mu.ctrlBytes, l.mu.overflow, l.mu.sync = nil, 0, false, nil
	transitLost := len(l.mu.transit)
	l.mu.transit, l.mu.transitBytes, l.mu.reach = nil, 0, nil
	for id, ch := range l.mu.pending {
		close(ch)
		delete(l.mu.pending, id)
	}
	l.mu.Unlock()
	l.up.Store(false)
	l.lm.up.Set(0)
	l.lm.transitDropped[TransitNoLink].Add(float64(transitLost))
	if errors.Is(err, errOverflow) {
		l.lm.resets.Inc()
	}
	m.log.Debug("peer: link down", "peer", l.id, "conn", c.n, "err", err)
	m.reroute()
	m.cfg.Handler.LinkDown(l.id)
	return next
}
