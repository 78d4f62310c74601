package mqttclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Client is one connection to a broker. Create it with Dial or Connect; end
// it with Disconnect (polite) or Close (abrupt). See the package doc for its
// goroutines and callbacks.
type Client struct {
	conn       net.Conn
	opts       Options
	version    packet.Version
	clk        clock.Clock
	info       ServerInfo
	maxPending int
	aliasInMax uint16

	// window holds one token per QoS 1/2 publish awaiting acknowledgement;
	// its capacity is the in-flight window.
	window chan struct{}

	wake    chan struct{} // capacity 1: the writer has something to send
	done    chan struct{} // closed once the connection has ended (mu.err set)
	flushed chan struct{} // closed by the writer once the final DISCONNECT is written
	wg      sync.WaitGroup

	// mu guards the state shared by publishers, the reader and the writer.
	// Nothing is called while it is held except the codec and Trace.
	mu struct {
		sync.Mutex
		out       []byte        // encoded packets the writer has not taken yet
		spare     []byte        // the writer's last buffer, for reuse
		space     chan struct{} // closed when out is taken; made by a waiting publisher
		final     bool          // a DISCONNECT is queued: nothing more may be
		err       error         // why the connection ended; set once
		inflight  map[uint16]outbound
		reqs      map[uint16]chan packet.Packet // SUBSCRIBE/UNSUBSCRIBE awaiting their ack
		nextID    uint16
		pings     []pending
		lastWrite time.Time
		aliasOut  map[string]uint16
		pub       packet.Publish // scratch copy of the packet being encoded
	}

	// Owned by the reader goroutine.
	r       *packet.Reader
	aliasIn []string            // index = alias; allocated on first alias
	qos2In  map[uint16]struct{} // inbound QoS 2 ids awaiting PUBREL
	acks    []byte              // acknowledgements owed, flushed before the reader blocks
	ack     packet.Ack          // scratch
}

// outbound is a QoS 1 or 2 publish awaiting its acknowledgement.
type outbound struct {
	qos  byte
	rel  bool // QoS 2: PUBREC received, PUBREL sent
	done func(error)
}

// pending is an unanswered PINGREQ; ch is nil for a keepalive ping.
type pending struct {
	sent time.Time
	ch   chan struct{}
}

// Connect performs the MQTT handshake on conn, which the Client then owns
// (it is closed on failure too). It returns when the broker has accepted the
// connection; a refusal is a *ReasonError. ctx bounds the handshake only.
func Connect(ctx context.Context, conn net.Conn, opts Options) (*Client, error) {
	if err := opts.validate(); err != nil {
		conn.Close()
		return nil, err
	}
	c := &Client{
		conn: conn, opts: opts, version: opts.version(), clk: opts.Clock,
		maxPending: opts.MaxPending,
		wake:       make(chan struct{}, 1), done: make(chan struct{}), flushed: make(chan struct{}),
	}
	if c.clk == nil {
		c.clk = clock.Real{}
	}
	if c.maxPending == 0 {
		c.maxPending = defaultMaxPending
	}
	var maxIn uint32
	if c.version == packet.V5 {
		if opts.Props.Has(packet.PropMaximumPacketSize) {
			maxIn = opts.Props.MaximumPacketSize
		}
		c.aliasInMax = opts.Props.TopicAliasMaximum
	}
	c.r = packet.NewReader(conn, maxIn)
	c.r.SetVersion(c.version)

	ack, err := c.handshake(ctx)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.info = serverInfo(ack, opts.KeepAlive.Round(time.Second))
	window := int(c.info.ReceiveMaximum)
	if opts.MaxInflight > 0 && opts.MaxInflight < window {
		window = opts.MaxInflight
	}
	c.window = make(chan struct{}, window)
	c.mu.inflight = make(map[uint16]outbound)
	c.mu.reqs = make(map[uint16]chan packet.Packet)
	c.mu.lastWrite = c.clk.Now()
	c.qos2In = make(map[uint16]struct{})
	c.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// handshake writes CONNECT and reads CONNACK, within ctx.
func (c *Client) handshake(ctx context.Context) (*packet.Connack, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	cp := c.opts.connectPacket()
	buf, err := cp.Append(nil, c.version)
	if err != nil {
		stop()
		return nil, fmt.Errorf("mqttclient: CONNECT: %w", err)
	}
	c.trace(true, cp)
	if _, err := c.conn.Write(buf); err != nil {
		return nil, c.handshakeErr(ctx, stop, "sending CONNECT", err)
	}
	p, err := c.r.Next()
	if err != nil {
		switch {
		case errors.Is(err, io.EOF):
			err = errors.New("connection closed by the broker")
		case c.version == packet.V5 && errors.Is(err, packet.ErrMalformed):
			// A broker without MQTT 5 answers with a 3.1.1 CONNACK
			// (return code 1), which is not a valid MQTT 5 CONNACK.
			err = fmt.Errorf("%w (the broker may not support MQTT 5: try 3.1.1)", err)
		}
		return nil, c.handshakeErr(ctx, stop, "waiting for CONNACK", err)
	}
	if !stop() {
		return nil, fmt.Errorf("mqttclient: waiting for CONNACK: %w", ctx.Err())
	}
	_ = c.conn.SetDeadline(time.Time{})
	c.trace(false, p)
	ack, ok := p.(*packet.Connack)
	if !ok {
		return nil, fmt.Errorf("%w: %s before CONNACK", ErrProtocol, p.Type())
	}
	if ack.ReasonCode.IsError() {
		return nil, &ReasonError{Packet: packet.CONNACK, Code: ack.ReasonCode,
			Reason: ack.Props.ReasonString, ServerReference: ack.Props.ServerReference}
	}
	return ack, nil
}

func (c *Client) handshakeErr(ctx context.Context, stop func() bool, what string, err error) error {
	if !stop() && ctx.Err() != nil {
		err = ctx.Err()
	}
	return fmt.Errorf("mqttclient: %s: %w", what, err)
}

// Server returns what the broker announced in its CONNACK.
func (c *Client) Server() ServerInfo { return c.info }

// Version returns the protocol version of the connection.
func (c *Client) Version() packet.Version { return c.version }

// Window returns the in-flight window for QoS 1 and 2 publishes.
func (c *Client) Window() int { return cap(c.window) }

// Done is closed when the connection has ended, for whatever reason.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (nil while it is up). ErrClosed
// means the owner ended it.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// Close ends the connection at once, without DISCONNECT (so the broker
// publishes the will, if any), fails what is in flight with ErrClosed, and
// waits for the client's goroutines. It is idempotent.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	return nil
}

// Disconnect sends DISCONNECT (d, or a normal disconnection if nil) after
// everything already queued, waits until it is written and the broker has
// closed the connection (or ctx ends), then closes like Close. It returns
// the connection's earlier error if it had already ended.
func (c *Client) Disconnect(ctx context.Context, d *packet.Disconnect) error {
	if d == nil {
		d = &packet.Disconnect{}
	}
	c.mu.Lock()
	if err := c.mu.err; err != nil || c.mu.final {
		c.mu.Unlock()
		c.Close()
		if errors.Is(err, ErrClosed) {
			return nil
		}
		return err
	}
	wasEmpty := len(c.mu.out) == 0
	out, err := d.Append(c.mu.out, c.version)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("mqttclient: DISCONNECT: %w", err)
	}
	c.mu.out, c.mu.final = out, true
	c.trace(true, d)
	c.mu.Unlock()
	if wasEmpty {
		c.kick()
	}
	var res error
	select {
	case <-c.flushed:
		// Half-close so the broker sees the end of our stream after the
		// DISCONNECT, and wait for it to close its side: closing a socket
		// with unread input would reset the connection instead.
		if hc, ok := c.conn.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
			select {
			case <-c.done:
			case <-ctx.Done():
			}
		}
	case <-c.done:
		if err := c.Err(); !errors.Is(err, ErrClosed) {
			res = err
		}
	case <-ctx.Done():
		res = fmt.Errorf("mqttclient: DISCONNECT not sent: %w", ctx.Err())
	}
	c.Close()
	return res
}

// fail ends the connection with err (the first error wins), closes the
// socket and fails everything waiting. Callable from any goroutine.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		return
	}
	if c.mu.final && !errors.Is(err, ErrClosed) && errors.Is(err, ErrConnectionLost) {
		// The broker closing the connection after our DISCONNECT is the
		// expected end.
		err = ErrClosed
	}
	c.mu.err = err
	inflight := c.mu.inflight
	c.mu.inflight = nil
	c.mu.reqs = nil
	c.mu.pings = nil
	if c.mu.space != nil {
		close(c.mu.space)
		c.mu.space = nil
	}
	c.mu.Unlock()
	close(c.done)
	c.conn.Close()
	for _, o := range inflight {
		if o.done != nil {
			o.done(err)
		}
	}
}

// closedErrLocked returns the error to give a caller when nothing more may
// be queued.
func (c *Client) closedErrLocked() error {
	if c.mu.err != nil {
		return c.mu.err
	}
	if c.mu.final {
		return ErrClosed
	}
	return nil
}

func (c *Client) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Client) trace(out bool, p packet.Packet) {
	if c.opts.Trace != nil {
		c.opts.Trace(out, p)
	}
}

// nextIDLocked returns a free packet identifier, or 0 if all are in use.
func (c *Client) nextIDLocked() uint16 {
	if len(c.mu.inflight)+len(c.mu.reqs) >= maxPacketID {
		return 0
	}
	for {
		c.mu.nextID++
		if c.mu.nextID == 0 {
			c.mu.nextID = 1
		}
		id := c.mu.nextID
		if _, used := c.mu.inflight[id]; used {
			continue
		}
		if _, used := c.mu.reqs[id]; used {
			continue
		}
		return id
	}
}

// Ping sends PINGREQ and waits for the PINGRESP.
func (c *Client) Ping(ctx context.Context) error {
	ch := make(chan struct{})
	c.mu.Lock()
	if err := c.closedErrLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	wasEmpty := len(c.mu.out) == 0
	p := &packet.Pingreq{}
	c.mu.out, _ = p.Append(c.mu.out, c.version)
	c.mu.pings = append(c.mu.pings, pending{sent: c.clk.Now(), ch: ch})
	c.trace(true, p)
	c.mu.Unlock()
	if wasEmpty {
		c.kick()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.Err()
	}
}
