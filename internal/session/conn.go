package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/tcpinfo"
	"github.com/sextantmq/sextant/internal/topic"
)

// Conn is one client connection bound to a session. The reader side runs on
// a goroutine Serve starts; writes are made by whoever holds the writer
// role (see writer.go).
type Conn struct {
	env *Env
	nc  net.Conn
	r   *packet.Reader
	raw *rawSock // the socket of a plain TCP connection; nil for others

	// Fixed once CONNECT has been handled.
	version         packet.Version
	keepAlive       time.Duration
	clientRecvMax   uint16
	clientMaxPacket uint32 // 0: no limit
	clientAliasMax  uint16
	problemInfo     bool
	id              Identity // who the client authenticated as
	s               *Session

	// Reader-owned.
	aliasIn      []string
	readDeadline time.Time // when the read deadline was last pushed forward
	limited      bool      // a publish rate or bytes limit applies
	pubMsgs      bucket
	pubBytes     bucket

	// rb is the reader's batch: the writes its packets caused, made before
	// it reads again (see batch.go).
	rb batch

	// Owned by the holder of the writer role (see writer.go).
	writeDeadline time.Time // when the write deadline was last set
	pending       []byte    // bytes an inline write left unsent: the writer goroutine sends them first
	aliasOut      map[string]uint16
	nextAlias     uint16

	// Guarded by s.mu (the session's lock) once bound.
	w struct {
		held       bool // bound but CONNACK not yet queued: send nothing
		connack    *packet.Connack
		resp       []*respSlot
		writing    bool          // the writer role is held
		running    bool          // a writer goroutine exists
		idle       bool          // it is lingering without the role
		wake       chan struct{} // wakes it (capacity 1)
		resend     bool          // in-flight entries must be re-sent (after Bind)
		closing    bool          // the final packet (if any) is the last thing sent
		final      packet.Packet
		finalSent  bool
		gone       bool // the connection has ended
		sockClosed bool // the socket is closed: ctx is done
		ctx        context.Context
		cancel     context.CancelFunc
		inflightIn int // inbound QoS>0 publishes not yet fully acknowledged
		awaitRel   int // of those, QoS 2 flows whose PUBREC was written: the client's PUBREL is next
		space      chan struct{}
		flushed    chan struct{} // closed by the writer after the final packet
	}

	done      chan struct{}
	closeOnce sync.Once
	ackRTT    atomic.Int64 // smoothed PUBLISH->PUBACK round trip, nanoseconds (0: none yet)
	ended     func()
	// publishWill says, once the reader stops, whether the will goes out
	// (anything but a normal DISCONNECT). Reader-owned.
	publishWill bool
	// endReason is why the connection ends, the first reason noted
	// winning (see EndReason).
	endReason atomic.Pointer[string]
}

// noteEnd records why the connection ends, unless a reason was noted
// already (the server's DISCONNECT comes before the socket error it causes).
func (c *Conn) noteEnd(reason string) { c.endReason.CompareAndSwap(nil, &reason) }

// EndReason says why the connection ended or is ending ("" while it is
// up), for the broker's disconnect log.
func (c *Conn) EndReason() string {
	if p := c.endReason.Load(); p != nil {
		return *p
	}
	return ""
}

// RTT is the client's round-trip time: the kernel's (its minimum, see
// tcpinfo.RTT) for TCP connections, else the smoothed PUBLISH->PUBACK time (which includes the
// client's processing). source is "tcp_info", "puback" or "" when unknown.
func (c *Conn) RTT() (rtt time.Duration, source string) {
	if d, ok := tcpinfo.RTT(c.nc); ok {
		return d, "tcp_info"
	}
	if v := c.ackRTT.Load(); v > 0 {
		return time.Duration(v), "puback"
	}
	return 0, ""
}

// sampleRTT folds one PUBLISH->PUBACK round trip into the smoothed value
// (the 1/8 gain TCP uses).
func (c *Conn) sampleRTT(d time.Duration) {
	if d <= 0 {
		return
	}
	old := c.ackRTT.Load()
	if old == 0 {
		c.ackRTT.Store(int64(d))
		return
	}
	c.ackRTT.Store(old + (int64(d)-old)/8)
}

// respSlot is one response in the ordered FIFO: a control packet, or an
// acknowledgement described by its fields (encoded at write time, so a
// pending acknowledgement costs a few bytes, not a packet value).
type respSlot struct {
	p       packet.Packet // nil for an acknowledgement
	ack     ackFields
	ready   bool
	pending int  // completions still awaited before ready
	qos2    bool // a PUBREC: its flow ends on write only if it refuses
	dec     bool // writing it ends an inbound QoS 1/2 flow
	c       *Conn
}

// Ack implements Acker for the PUBACK/PUBREC a publish waits on.
func (sl *respSlot) Ack(code packet.ReasonCode) { sl.c.completeAck(sl, code) }

// PacketID is the packet id of the publish the slot acknowledges: with the
// client id, what the sequenced publish path deduplicates retries by.
func (sl *respSlot) PacketID() uint16 { return sl.ack.PacketID }

// Serve runs one client connection to its end: the CONNECT handshake, then
// the read loop. It closes nc before returning. A panic in the connection's
// code is recovered, logged with its stack and counted.
//
// Serve handles the CONNECT handshake on the calling goroutine and returns;
// the connection's reader then runs on a goroutine of its own, started at
// the shallowest possible stack: it lives as long as the connection, and a
// goroutine's stack never shrinks below four times what it uses while
// parked in a socket read, so a deep stack here would cost every idle
// connection. ended (if not nil) is called once the connection is over.
func Serve(nc net.Conn, env *Env, ended func()) {
	c := &Conn{env: env, nc: nc, raw: newRawSock(nc), done: make(chan struct{}), ended: ended, publishWill: true}
	c.rb.owner = c
	if !c.guard(c.connect) {
		c.finish()
		return
	}
	go c.run()
}

// run is the reader goroutine's body. When nothing is buffered it reads the
// client's next bytes right here, at the top of the goroutine, so an idle
// connection parks with the smallest stack the runtime allows (see Serve);
// decoding and handling happen in step, deeper, and return.
//
// Each read takes in every byte the socket holds, and the reader handles
// every complete packet in it before it reads again; the writes those
// packets caused wait in its batch until then (see batch.go).
func (c *Conn) run() {
	defer c.exit()
	for {
		if c.r.Buffered() == 0 {
			c.rb.flush()
			c.armKeepAlive()
			space := c.r.Space()
			n, err := c.readSocket(space)
			if n == 0 && err != nil {
				c.readFailed(err)
				return
			}
			c.r.Wrote(n, err)
			c.env.Metrics.BytesIn.Add(float64(n))
			c.rb.reopen(n == len(space))
		}
		if t, ok := c.r.PeekType(); ok && rare(t) {
			// Decoding and handling these go deep, and so does writing
			// their answers: doing both on a short-lived goroutine keeps
			// this one's stack minimal for a client that subscribes and
			// then idles.
			var more bool
			onFreshStack(func() {
				more = c.step()
				c.rb.flush()
			})
			if !more {
				return
			}
		} else if !c.step() {
			return
		}
	}
}

// rare reports packet types that are not part of a message flow.
func rare(t packet.Type) bool {
	switch t {
	case packet.PUBLISH, packet.PUBACK, packet.PUBREC, packet.PUBREL, packet.PUBCOMP, packet.PINGREQ:
		return false
	}
	return true
}

// exit ends the reader goroutine: a panic is logged with its stack, counted
// and contained; the connection is torn down and its end reported.
func (c *Conn) exit() {
	if r := recover(); r != nil {
		c.env.Metrics.Panics.Inc()
		c.logger().Error("panic in connection handler", "panic", r, "stack", string(debug.Stack()))
		c.noteEnd("panic in the connection handler")
		c.publishWill = true
	}
	c.flushSafely() // connections the batch took on must not wait for a reader that is gone
	c.end(c.publishWill)
	c.finish()
}

// guard runs f, recovering a panic: it is logged with its stack, counted,
// and ends the connection.
func (c *Conn) guard(f func() bool) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.env.Metrics.Panics.Inc()
			c.logger().Error("panic in connection handler", "panic", r, "stack", string(debug.Stack()))
			c.end(true)
			ok = false
		}
	}()
	return f()
}

// finish reports the end of the connection to whoever started it.
func (c *Conn) finish() {
	if c.ended != nil {
		c.ended()
	}
}

// onFreshStack runs f on a short-lived goroutine and waits for it: the deep,
// rare packets (SUBSCRIBE, UNSUBSCRIBE, DISCONNECT...) are handled there so
// that they do not grow the long-lived reader's stack (see Serve). A panic
// in f is re-raised in the caller, where it is recovered.
func onFreshStack(f func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}

// isLoopback reports whether a client connects from the node's own host.
func isLoopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// logger returns a logger naming the connection. It is built on demand:
// a logger per connection would cost memory on every idle connection for
// lines that are rarely written.
func (c *Conn) logger() *slog.Logger {
	l := c.env.Log.With("remote", c.nc.RemoteAddr().String())
	if c.s != nil {
		l = l.With("client", c.s.ID)
	}
	return l
}

// Done is closed when the connection has fully ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Version is the connection's protocol version.
func (c *Conn) Version() packet.Version { return c.version }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// User is the user name the client authenticated as ("" when anonymous).
func (c *Conn) User() string { return c.id.User }

// connect reads CONNECT and handles it; on failure it closes the
// connection and reports false.
func (c *Conn) connect() bool {
	lim := &c.env.Limits
	_ = c.nc.SetReadDeadline(c.env.Clock.Now().Add(lim.ConnectTimeout))
	c.r = packet.NewReader(countingReader{c}, lim.MaxPacketSize)
	p, err := c.r.Next()
	if err != nil {
		if errors.Is(err, packet.ErrUnsupportedVersion) {
			c.writeNow(&packet.Connack{ReasonCode: packet.UnsupportedProtocolVersion}, packet.V311)
		}
		c.countProtocolError(err)
		c.closeSocket()
		close(c.done)
		return false
	}
	cp, ok := p.(*packet.Connect)
	if !ok || !c.handshake(cp) {
		if !ok {
			c.countProtocolError(err)
		}
		c.closeSocket()
		close(c.done)
		return false
	}
	return true
}

// handshake validates CONNECT, attaches the session and queues CONNACK.
func (c *Conn) handshake(cp *packet.Connect) bool {
	lim := &c.env.Limits
	c.version = cp.Version
	if c.version == packet.V31 {
		c.version = packet.V311
	}
	c.r.SetVersion(cp.Version)
	refuse := func(code packet.ReasonCode, reason string) bool {
		ack := &packet.Connack{ReasonCode: code}
		if c.version == packet.V5 && reason != "" && c.problemInfo {
			ack.Props.SetReasonString(reason)
		}
		c.env.Metrics.ConnectionsRefused.WithLabelValues(code.String()).Inc()
		c.writeNow(ack, c.version)
		return false
	}
	v5 := c.version == packet.V5
	c.problemInfo = true
	c.clientRecvMax = 65535
	if v5 {
		if cp.Props.Has(packet.PropRequestProblemInfo) {
			c.problemInfo = cp.Props.RequestProblemInfo == 1
		}
		if cp.Props.Has(packet.PropReceiveMaximum) {
			c.clientRecvMax = cp.Props.ReceiveMaximum
		}
		if cp.Props.Has(packet.PropMaximumPacketSize) {
			c.clientMaxPacket = cp.Props.MaximumPacketSize
		}
		c.clientAliasMax = cp.Props.TopicAliasMaximum
		if cp.Props.Has(packet.PropAuthMethod) {
			return refuse(packet.BadAuthenticationMethod, "enhanced authentication is not supported")
		}
	}
	if connectRateExceeded(c.nc) {
		return refuse(packet.ConnectionRateExceeded, "too many connections from this address")
	}
	if len(cp.ClientID) > lim.MaxClientIDLength {
		return refuse(packet.ClientIdentifierNotValid, "client identifier too long")
	}
	assigned := ""
	if cp.ClientID == "" {
		if !v5 && !cp.CleanStart {
			return refuse(packet.ClientIdentifierNotValid, "an empty client identifier needs a clean session")
		}
		assigned = newClientID()
		cp.ClientID = assigned
	}
	if cp.WillFlag {
		if err := c.checkTopicName(cp.WillTopic); err != nil {
			return refuse(packet.TopicNameInvalid, "will topic: "+err.Error())
		}
		if cp.WillProps.Has(packet.PropPayloadFormat) && cp.WillProps.PayloadFormat == 1 && !utf8.Valid(cp.WillPayload) {
			return refuse(packet.PayloadFormatInvalid, "will payload is not valid UTF-8")
		}
	}

	if !c.authenticate(cp, refuse) {
		return false
	}
	if (lim.PublishRate > 0 || lim.PublishBytes > 0) && (lim.LimitLoopback || !isLoopback(c.nc.RemoteAddr())) {
		now := c.env.Clock.Now()
		c.limited = true
		c.pubMsgs = newBucket(float64(lim.PublishRate), float64(lim.PublishRate), now)
		c.pubBytes = newBucket(float64(lim.PublishBytes), float64(max(uint32(lim.PublishBytes), lim.MaxPacketSize)), now)
	}

	// Keep alive: MQTT 5 clients get Server Keep Alive when they ask for more
	// than the node grants (or for none while the node caps it).
	ka := cp.KeepAlive
	serverKA := false
	if v5 && lim.MaxKeepAlive < 65535 && (ka == 0 || ka > lim.MaxKeepAlive) {
		ka, serverKA = lim.MaxKeepAlive, true
	}
	c.keepAlive = time.Duration(ka) * time.Second

	expiry := uint32(0)
	if v5 {
		expiry = cp.Props.SessionExpiry
	} else if !cp.CleanStart {
		expiry = NeverExpire
	}
	expiryCapped := false
	if lim.MaxSessionExpiry > 0 && expiry > lim.MaxSessionExpiry {
		expiry, expiryCapped = lim.MaxSessionExpiry, true
	}
	cp.Props.SessionExpiry = expiry

	s, present, code, reason := c.env.Hub.Attach(c, cp)
	if s == nil {
		if code == packet.Success {
			code = packet.UnspecifiedError
		}
		return refuse(code, reason)
	}
	c.s = s
	if cp.WillFlag {
		s.SetWill(willMessage(cp, s.ID, c.env.Clock.Now()), cp.WillProps.WillDelay)
	} else {
		s.SetWill(nil, 0)
	}

	ack := &packet.Connack{SessionPresent: present}
	if v5 {
		if expiryCapped {
			ack.Props.SetSessionExpiry(expiry)
		}
		ack.Props.SetReceiveMaximum(lim.ReceiveMaximum)
		ack.Props.SetMaximumPacketSize(lim.MaxPacketSize)
		ack.Props.SetTopicAliasMaximum(lim.TopicAliasMaximum)
		if assigned != "" {
			ack.Props.SetAssignedClientID(assigned)
		}
		if serverKA {
			ack.Props.SetServerKeepAlive(ka)
		}
		if cp.Props.RequestResponseInfo == 1 {
			ack.Props.SetResponseInfo("response/" + s.ID + "/")
		}
	}
	c.env.Metrics.ConnectionsTotal.Inc()
	c.env.Metrics.ConnectionsCurrent.Inc()
	if c.keepAlive > 0 {
		_ = c.nc.SetReadDeadline(c.env.Clock.Now().Add(c.keepAlive * 3 / 2))
	} else {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	s.mu.Lock()
	c.w.connack = ack
	c.w.held = false
	c.kickWriterLocked(nil)
	s.mu.Unlock()
	return true
}

// ackFields describe a PUBACK/PUBREC/PUBREL/PUBCOMP to send.
type ackFields struct {
	Kind       packet.Type
	PacketID   uint16
	ReasonCode packet.ReasonCode
}

func newClientID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "sx-" + hex.EncodeToString(b[:])
}

func willMessage(cp *packet.Connect, clientID string, now time.Time) *message.Message {
	m := &message.Message{
		Topic: cp.WillTopic, Payload: append([]byte(nil), cp.WillPayload...), QoS: cp.WillQoS,
		Retain: cp.WillRetain, Publisher: clientID, Created: now,
	}
	applyProps(m, &cp.WillProps, now)
	return m
}

// applyProps copies the end-to-end properties of a PUBLISH (or will) into m.
func applyProps(m *message.Message, p *packet.Properties, now time.Time) {
	if p.Present == 0 && len(p.User) == 0 {
		return
	}
	m.PayloadFormat = p.PayloadFormat
	m.ContentType = p.ContentType
	m.ResponseTopic = p.ResponseTopic
	if len(p.CorrelationData) > 0 {
		m.CorrelationData = append([]byte(nil), p.CorrelationData...)
	}
	if p.Has(packet.PropMessageExpiry) {
		m.Expiry = now.Add(time.Duration(p.MessageExpiry) * time.Second)
	}
	if len(p.User) > 0 {
		m.User = make([]message.UserProperty, len(p.User))
		for i, u := range p.User {
			m.User[i] = message.UserProperty{Key: u.Key, Value: u.Value}
		}
	}
}

func (c *Conn) checkTopicName(name string) error {
	if err := topic.ValidateName(name); err != nil {
		return err
	}
	return topic.Limits{MaxLength: c.env.Limits.MaxTopicLength, MaxLevels: c.env.Limits.MaxTopicLevels}.Check(name)
}

// writeNow writes one packet synchronously; used before a session is bound.
func (c *Conn) writeNow(p packet.Packet, v packet.Version) {
	b, err := p.Append(nil, v)
	if err != nil {
		return
	}
	_ = c.nc.SetWriteDeadline(c.env.Clock.Now().Add(c.env.Limits.WriteTimeout))
	_, _ = c.nc.Write(b)
}

func (c *Conn) countProtocolError(err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return
	}
	c.env.Metrics.ProtocolErrors.WithLabelValues(packet.CodeOf(err).String()).Inc()
	c.logger().Debug("closing connection on bad input", "err", err)
}

func (c *Conn) closeSocket() {
	c.closeOnce.Do(func() {
		_ = c.nc.Close()
		if s := c.s; s != nil {
			s.mu.Lock()
			c.w.sockClosed = true
			if c.w.cancel != nil {
				c.w.cancel()
			}
			s.mu.Unlock()
		}
	})
}

// context returns the connection's context, made on first use (few
// connections need one): it ends when the socket is closed, so that a
// reader blocked on the store gives up with its connection.
func (c *Conn) context() context.Context {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.w.ctx == nil {
		c.w.ctx, c.w.cancel = context.WithCancel(context.Background())
		if c.w.sockClosed {
			c.w.cancel()
		}
	}
	return c.w.ctx
}

// passThrough is a connection wrapper whose bytes reach the connection it
// wraps unchanged (the listener's admission wrapper), so the socket
// underneath may be read and written directly. TLS and WebSocket
// connections transform their bytes and must not implement it.
type passThrough interface{ PassThrough() net.Conn }

// readSocket reads the client's next bytes.
func (c *Conn) readSocket(p []byte) (int, error) {
	if c.raw != nil {
		return c.raw.Read(p)
	}
	return c.nc.Read(p)
}

// countingReader is the packet.Reader's source: it reads the rest of a
// packet that arrived in pieces (run reads whole buffers), writing the
// reader's batch first, and counts the bytes.
type countingReader struct{ c *Conn }

func (d countingReader) Read(p []byte) (int, error) {
	c := d.c
	c.rb.flush()
	n, err := c.readSocket(p)
	if n > 0 {
		c.env.Metrics.BytesIn.Add(float64(n))
	}
	c.rb.reopen(n == len(p))
	return n, err
}

// armKeepAlive pushes the keep-alive read deadline forward. Moving a
// deadline costs a timer update, so it moves at most every quarter
// keep-alive, to 1.75x keep-alive ahead: the client is always given at least
// the 1.5x the specification grants.
func (c *Conn) armKeepAlive() {
	if ka := c.keepAlive; ka > 0 {
		now := c.env.Clock.Now()
		if now.Sub(c.readDeadline) >= ka/4 {
			_ = c.nc.SetReadDeadline(now.Add(ka*3/2 + ka/4))
			c.readDeadline = now
		}
	}
}
