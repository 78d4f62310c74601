package session

import (
	"context"
	"errors"
	"io"
	"net"
	"time"
	"unicode/utf8"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/store"
	"github.com/sextantmq/sextant/internal/topic"
)

// respBound bounds the response FIFO: past it the reader stops reading until
// the writer catches up (a client that sends requests but does not read).
const respBound = 4096

// finalWait is how long a connection being closed gives its final
// DISCONNECT to reach the client before the socket is closed anyway.
const finalWait = 2 * time.Second

// errClosing ends the read loop after the connection was told to close.
var errClosing = errors.New("session: connection closing")

// step reads and handles one packet; it reports false when the connection
// must end (c.publishWill then says whether its will goes out).
//
//go:noinline
func (c *Conn) step() bool {
	if err := c.waitForRoom(); err != nil {
		// The broker is closing the connection: let the writer put its
		// DISCONNECT on the wire before end closes the socket.
		c.waitFlushed()
		return false
	}
	p, err := c.r.Next()
	if err != nil {
		c.readFailed(err)
		return false
	}
	c.env.Metrics.PacketsIn.Inc()
	var herr error
	switch p := p.(type) {
	case *packet.Publish:
		herr = c.onPublish(p)
	case *packet.Ack:
		herr = c.onAck(p)
	case *packet.Subscribe:
		herr = c.onSubscribe(p)
	case *packet.Unsubscribe:
		c.onUnsubscribe(p)
	case *packet.Pingreq:
		c.respond(&packet.Pingresp{}, false)
	case *packet.Disconnect:
		c.publishWill, herr = c.onDisconnect(p)
		if herr == nil {
			return false
		}
	case *packet.Auth:
		herr = protocolError("AUTH without an authentication method")
	case *packet.Connect:
		herr = protocolError("second CONNECT")
	default:
		herr = protocolError("a client may not send " + packet.Describe(p))
	}
	if herr != nil {
		if !errors.Is(herr, errClosing) {
			c.closeWithError(herr)
		}
		return false
	}
	return true
}

// handlerError is a protocol violation with the reason code to send.
type handlerError struct {
	code   packet.ReasonCode
	reason string
	limit  bool // an abuse limit, not a protocol violation
}

func (e *handlerError) Error() string { return e.reason }

func protocolError(reason string) error {
	return &handlerError{code: packet.ProtocolError, reason: reason}
}

// readFailed handles the end of input: EOF, keep-alive timeout, bad bytes.
func (c *Conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		c.noteEnd("the connection was closed without DISCONNECT")
	case errors.As(err, &ne) && ne.Timeout():
		if c.isClosing() {
			return
		}
		c.logger().Debug("keep alive expired")
		c.noteEnd("keep alive timeout")
		c.sendFinal(packet.KeepAliveTimeout, "keep alive timeout")
	default:
		if c.isClosing() {
			return
		}
		c.countProtocolError(err)
		c.noteEnd("bad input: " + err.Error())
		c.sendFinal(packet.CodeOf(err), err.Error())
	}
}

// closeWithError reports a protocol violation found while handling a packet.
func (c *Conn) closeWithError(err error) {
	code, reason := packet.ProtocolError, err.Error()
	var he *handlerError
	if errors.As(err, &he) {
		code = he.code
	} else {
		code = packet.CodeOf(err)
	}
	if he == nil || !he.limit {
		c.env.Metrics.ProtocolErrors.WithLabelValues(code.String()).Inc()
		c.logger().Debug("closing connection on protocol violation", "code", code, "reason", reason)
	}
	c.noteEnd(reason + " (" + code.String() + ")")
	c.sendFinal(code, reason)
}

// sendFinal sends DISCONNECT (MQTT 5 only) as the last packet, waits
// briefly for it to be written, and lets the caller close the socket.
func (c *Conn) sendFinal(code packet.ReasonCode, reason string) {
	if c.version != packet.V5 || c.s == nil {
		return
	}
	c.s.mu.Lock()
	if c.w.closing {
		c.s.mu.Unlock()
		return
	}
	c.setFinalLocked(code, reason)
	c.s.mu.Unlock()
	c.waitFlushed()
}

// waitFlushed waits, at most finalWait, until the writer has sent the
// final packet the connection was given, if any.
func (c *Conn) waitFlushed() {
	c.rb.flush()
	c.s.mu.Lock()
	flushed := c.w.flushed
	c.s.mu.Unlock()
	if flushed == nil {
		return
	}
	t := c.env.Clock.NewTimer(finalWait)
	defer t.Stop()
	select {
	case <-flushed:
	case <-t.C():
	}
}

func (c *Conn) setFinalLocked(code packet.ReasonCode, reason string) {
	c.noteEnd(reason + " (" + code.String() + ")")
	c.w.closing = true
	c.wakeReaderLocked()
	c.w.flushed = make(chan struct{})
	if c.version == packet.V5 {
		d := &packet.Disconnect{ReasonCode: code}
		if reason != "" {
			d.Props.SetReasonString(reason)
		}
		c.w.final = d
	}
	c.kickWriterLocked(nil)
}

// Disconnect asks the connection to end: MQTT 5 clients get DISCONNECT with
// code. It returns at once; Done is closed when the connection has ended.
// A client that does not take the DISCONNECT within finalWait is cut off.
func (c *Conn) Disconnect(code packet.ReasonCode, reason string) {
	s := c.s
	if s == nil {
		c.closeSocket()
		return
	}
	s.mu.Lock()
	if c.w.closing || c.w.gone {
		s.mu.Unlock()
		return
	}
	c.setFinalLocked(code, reason)
	if c.version != packet.V5 {
		c.s.mu.Unlock()
		c.closeSocket()
		return
	}
	s.mu.Unlock()
	c.env.Clock.AfterFunc(finalWait, c.closeSocket)
}

func (c *Conn) isClosing() bool {
	if c.s == nil {
		return false
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.w.closing || c.w.gone
}

// end tears the connection down once: stop the writer, close the socket,
// and tell the broker.
func (c *Conn) end(publishWill bool) {
	s := c.s
	if s != nil {
		s.mu.Lock()
		already := c.w.gone
		c.w.gone = true
		c.wakeReaderLocked()
		c.wakeWriterLocked() // a lingering writer exits
		s.mu.Unlock()
		if already {
			return
		}
	}
	c.closeSocket()
	if s != nil {
		c.env.Metrics.ConnectionsCurrent.Dec()
		c.env.Hub.Detach(s, c, publishWill)
	}
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// wakeReaderLocked wakes a reader parked in waitForRoom.
func (c *Conn) wakeReaderLocked() {
	if c.w.space != nil {
		close(c.w.space)
		c.w.space = nil
	}
}

// waitForRoom blocks while the response FIFO is at its bound or, for MQTT
// 3.1.1 clients (which have no Receive Maximum to respect), while the
// client has as many unacknowledged publishes as the node allows. QoS 2
// flows waiting for the client's PUBREL do not count: the reader must read
// on to receive it.
func (c *Conn) waitForRoom() error {
	s := c.s
	for {
		s.mu.Lock()
		if c.w.gone || c.w.closing {
			s.mu.Unlock()
			return errClosing
		}
		full := len(c.w.resp) >= respBound ||
			(c.version != packet.V5 && c.w.inflightIn-c.w.awaitRel >= int(c.env.Limits.ReceiveMaximum))
		if !full {
			s.mu.Unlock()
			return nil
		}
		if c.w.space == nil {
			c.w.space = make(chan struct{})
		}
		ch := c.w.space
		s.mu.Unlock()
		c.rb.flush() // the room comes from writing, which may be this batch's
		<-ch
	}
}

// respond queues a response that is ready now. dec marks a response whose
// writing completes an inbound QoS 1/2 flow (for the receive maximum).
func (c *Conn) respond(p packet.Packet, dec bool) {
	c.s.mu.Lock()
	c.w.resp = append(c.w.resp, &respSlot{p: p, ready: true, dec: dec})
	c.kickWriterLocked(nil)
	c.s.mu.Unlock()
}

// reserve queues a response that becomes ready after pending completions.
func (c *Conn) reserve(p packet.Packet, pending int) *respSlot {
	sl := &respSlot{p: p, pending: pending, c: c}
	c.s.mu.Lock()
	c.w.resp = append(c.w.resp, sl)
	c.s.mu.Unlock()
	return sl
}

// complete records one completion of a reserved response.
func (c *Conn) complete(sl *respSlot) {
	c.s.mu.Lock()
	sl.pending--
	if sl.pending <= 0 {
		sl.ready = true
		c.kickWriterLocked(nil)
	}
	c.s.mu.Unlock()
}

func (c *Conn) onPublish(p *packet.Publish) error {
	s, lim := c.s, &c.env.Limits
	v5 := c.version == packet.V5
	if c.limited {
		if err := c.throttle(len(p.Topic) + len(p.Payload)); err != nil {
			return err
		}
	}
	name := p.Topic
	if v5 && p.Props.Has(packet.PropTopicAlias) {
		a := p.Props.TopicAlias
		if a == 0 || a > lim.TopicAliasMaximum {
			return &handlerError{code: packet.TopicAliasInvalid, reason: "topic alias out of range"}
		}
		if c.aliasIn == nil {
			c.aliasIn = make([]string, lim.TopicAliasMaximum+1)
		}
		if name == "" {
			name = c.aliasIn[a]
			if name == "" {
				return protocolError("unknown topic alias")
			}
		} else {
			c.aliasIn[a] = name
		}
	}
	if err := c.checkTopicName(name); err != nil {
		if p.QoS > 0 && v5 {
			c.respondAck(p, packet.TopicNameInvalid)
			return nil
		}
		return &handlerError{code: packet.TopicNameInvalid, reason: err.Error()}
	}
	if p.Props.Has(packet.PropPayloadFormat) && p.Props.PayloadFormat == 1 && !utf8.Valid(p.Payload) {
		if p.QoS > 0 && v5 {
			c.respondAck(p, packet.PayloadFormatInvalid)
			return nil
		}
		if v5 {
			return &handlerError{code: packet.PayloadFormatInvalid, reason: "payload is not valid UTF-8"}
		}
	}
	if !mayPublish(c.id.Rights, name) {
		c.refusePublish(p, name)
		return nil
	}
	now := c.env.Clock.Now()
	c.env.Metrics.MessagesIn[p.QoS].Inc()

	if p.QoS == 2 {
		s.mu.Lock()
		_, dup := s.mu.inbound[p.PacketID]
		s.mu.Unlock()
		if dup {
			// Already received and routed; the client did not see PUBREC.
			c.respond(&packet.Ack{Kind: packet.PUBREC, PacketID: p.PacketID}, false)
			return nil
		}
	}
	if p.QoS > 0 {
		s.mu.Lock()
		c.w.inflightIn++
		over := v5 && c.w.inflightIn > int(lim.ReceiveMaximum)
		s.mu.Unlock()
		if over {
			return &handlerError{code: packet.ReceiveMaximumExceeded, reason: "receive maximum exceeded"}
		}
	}

	m := &message.Message{
		Topic: name, Payload: append([]byte(nil), p.Payload...), QoS: p.QoS, Retain: p.Retain,
		Publisher: s.ID, Created: now,
	}
	if v5 {
		applyProps(m, &p.Props, now)
	}
	switch p.QoS {
	case 0:
		c.env.Hub.Publish(s, m, nil)
	case 1:
		sl := c.reserve(nil, 1)
		sl.dec = true
		sl.ack = ackFields{Kind: packet.PUBACK, PacketID: p.PacketID}
		c.env.Hub.Publish(s, m, sl)
	case 2:
		pending := 1
		var b *store.Batch
		s.mu.Lock()
		if s.mu.inbound == nil {
			s.mu.inbound = map[uint16]struct{}{}
		}
		s.mu.inbound[p.PacketID] = struct{}{}
		if s.mu.expiry > 0 && c.env.Store != nil {
			b = &store.Batch{}
			b.PutInbound(s.ID, p.PacketID)
			pending = 2
		}
		s.mu.Unlock()
		sl := c.reserve(nil, pending)
		sl.qos2 = true
		sl.ack = ackFields{Kind: packet.PUBREC, PacketID: p.PacketID}
		if b != nil {
			if err := c.env.Store.Commit(c.context(), b, func(err error) {
				if err != nil {
					c.completeAck(sl, packet.ImplementationSpecificError)
					return
				}
				c.completeAck(sl, packet.Success)
			}); err != nil {
				c.completeAck(sl, packet.ImplementationSpecificError)
			}
		}
		c.env.Hub.Publish(s, m, sl)
	}
	return nil
}

// refusePublish answers a PUBLISH that access control refused: MQTT 5
// PUBACK/PUBREC 0x87; in 3.1.1, which cannot say so, the message is
// acknowledged as usual and dropped (MQTT 3.1.1 section 3.3.5). QoS 0 is
// dropped silently in both.
func (c *Conn) refusePublish(p *packet.Publish, name string) {
	c.env.Metrics.AccessDenied.WithLabelValues(deniedPublish).Inc()
	c.logger().Debug("publish not authorized", "topic", name)
	if p.QoS == 0 {
		return
	}
	code := packet.NotAuthorized
	if c.version != packet.V5 {
		code = packet.Success
	}
	c.respondAck(p, code)
}

// completeAck records a completion of a PUBACK/PUBREC slot; the worst code
// wins. A failure on a 3.1.1 connection, which cannot carry it, closes the
// connection so the client retries.
func (c *Conn) completeAck(sl *respSlot, code packet.ReasonCode) {
	c.s.mu.Lock()
	if code.IsError() || (sl.ack.ReasonCode == packet.Success && code != packet.Success) {
		sl.ack.ReasonCode = code
	}
	sl.pending--
	ready := sl.pending <= 0
	if ready {
		sl.ready = true
		if sl.qos2 && sl.ack.ReasonCode.IsError() {
			delete(c.s.mu.inbound, sl.ack.PacketID)
		}
		c.kickWriterLocked(nil)
	}
	failed := ready && sl.ack.ReasonCode.IsError() && c.version != packet.V5
	c.s.mu.Unlock()
	if failed {
		c.Disconnect(sl.ack.ReasonCode, "")
	}
}

// respondAck answers a QoS>0 publish that was refused before routing.
func (c *Conn) respondAck(p *packet.Publish, code packet.ReasonCode) {
	kind := packet.PUBACK
	if p.QoS == 2 {
		kind = packet.PUBREC
	}
	c.s.mu.Lock()
	c.w.inflightIn++
	c.s.mu.Unlock()
	c.respond(&packet.Ack{Kind: kind, PacketID: p.PacketID, ReasonCode: code}, true)
}

func (c *Conn) onAck(p *packet.Ack) error {
	s := c.s
	switch p.Kind {
	case packet.PUBREL:
		s.mu.Lock()
		_, ok := s.mu.inbound[p.PacketID]
		delete(s.mu.inbound, p.PacketID)
		if ok && c.w.awaitRel > 0 {
			c.w.awaitRel--
		}
		persist := ok && s.mu.expiry > 0 && c.env.Store != nil
		s.mu.Unlock()
		code := packet.Success
		if !ok && c.version == packet.V5 {
			code = packet.PacketIdentifierNotFound
		}
		if persist {
			var b store.Batch
			b.DeleteInbound(s.ID, p.PacketID)
			c.commitBehind(&b)
		}
		c.respond(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID, ReasonCode: code}, ok)
		return nil
	case packet.PUBACK, packet.PUBCOMP:
		return c.completeOutbound(p)
	case packet.PUBREC:
		s.mu.Lock()
		d := s.mu.inflight.Find(p.PacketID)
		if d == nil || d.QoS != 2 || d.state != stateWaitAck {
			s.mu.Unlock()
			if d == nil {
				// Unknown id: answer so the client's flow completes.
				c.respond(&packet.Ack{Kind: packet.PUBREL, PacketID: p.PacketID, ReasonCode: c.v5Code(packet.PacketIdentifierNotFound)}, false)
				return nil
			}
			return protocolError("PUBREC for a message not awaiting it")
		}
		if p.ReasonCode.IsError() {
			// The client refused the message: the flow ends here.
			s.mu.Unlock()
			return c.completeOutbound(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID})
		}
		d.state = stateWaitRel
		var b *store.Batch
		if d.seq != 0 && c.env.Store != nil {
			b = &store.Batch{}
			b.PutMessage(s.ID, d.record())
		}
		hold := d.hold
		s.mu.Unlock()
		if b != nil && hold {
			// The PUBREL goes once ReleaseSent is durable: sent before, a
			// crash would send the message again under the packet id the
			// client has released (writer.go, held deliveries).
			sl := c.reserve(&packet.Ack{Kind: packet.PUBREL, PacketID: p.PacketID}, 1)
			if err := c.env.Store.Commit(context.Background(), b, func(err error) {
				if err != nil {
					c.logger().Error("store write failed", "err", err)
				}
				c.complete(sl)
			}); err != nil {
				c.logger().Error("store write failed", "err", err)
				c.complete(sl)
			}
			return nil
		}
		if b != nil {
			c.commitBehind(b)
		}
		c.respond(&packet.Ack{Kind: packet.PUBREL, PacketID: p.PacketID}, false)
		return nil
	}
	return protocolError("unexpected acknowledgement")
}

func (c *Conn) v5Code(code packet.ReasonCode) packet.ReasonCode {
	if c.version == packet.V5 {
		return code
	}
	return packet.Success
}

// completeOutbound ends an outbound QoS 1 (PUBACK) or QoS 2 (PUBCOMP) flow.
func (c *Conn) completeOutbound(p *packet.Ack) error {
	s := c.s
	s.mu.Lock()
	d := s.mu.inflight.Find(p.PacketID)
	if d == nil {
		s.mu.Unlock()
		return nil // a late or duplicate acknowledgement: nothing to do
	}
	want := stateWaitAck
	if d.QoS == 2 {
		want = stateWaitRel
	}
	if (p.Kind == packet.PUBACK) != (d.QoS == 1) || d.state != want {
		s.mu.Unlock()
		return protocolError("acknowledgement does not match the message's QoS flow")
	}
	done, _ := s.mu.inflight.Complete(p.PacketID)
	c.env.Metrics.InflightMessages.Dec()
	if done.sentAt != 0 && p.Kind == packet.PUBACK {
		c.sampleRTT(time.Duration(c.env.Clock.Now().UnixNano() - done.sentAt))
	}
	if s.mu.queue.Len() > 0 || s.mu.spilled > 0 {
		c.kickWriterLocked(nil)
	}
	s.mu.Unlock()
	if done.seq != 0 && c.env.Store != nil {
		if done.ticket == nil || !done.ticket.deferDelete(s.ID, done.seq) {
			var b store.Batch
			b.DeleteMessage(s.ID, done.seq)
			c.commitBehind(&b)
		}
	}
	return nil
}

// commitBehind commits a write whose durability nobody waits for: delivery
// state and deletions, which must reach the store even when the connection
// has ended (a lost deletion of an inbound QoS 2 id would, after a restart,
// make the client's next message with that id look like a duplicate). So
// it deliberately takes no context that ends with the connection or the
// node: a Commit blocked on a full queue is released by the store's Close,
// which queues it first.
func (c *Conn) commitBehind(b *store.Batch) {
	if err := c.env.Store.Commit(context.Background(), b, func(err error) {
		if err != nil {
			c.logger().Error("store write failed", "err", err)
		}
	}); err != nil {
		c.logger().Error("store write failed", "err", err)
	}
}

func (c *Conn) onSubscribe(p *packet.Subscribe) error {
	lim := &c.env.Limits
	codes := make([]packet.ReasonCode, len(p.Subs))
	var reqs []SubRequest
	var idx []int
	var id uint32
	if len(p.Props.SubscriptionIDs) > 0 {
		id = p.Props.SubscriptionIDs[0]
	}
	have := c.s.SubscriptionCount()
	sysRefused := false
	limits := topic.Limits{MaxLength: lim.MaxTopicLength, MaxLevels: lim.MaxTopicLevels}
	from, ferr := fromProperty(p.Props.User)
	for i, sub := range p.Subs {
		if ferr != nil {
			codes[i] = packet.ImplementationSpecificError
			continue
		}
		if err := topic.ValidateFilter(sub.Filter); err != nil {
			codes[i] = packet.TopicFilterInvalid
			continue
		}
		if err := limits.Check(sub.Filter); err != nil {
			codes[i] = packet.TopicFilterInvalid
			continue
		}
		_, _, shared, _ := topic.ParseShared(sub.Filter)
		if shared && sub.NoLocal {
			return protocolError("no local on a shared subscription")
		}
		if !maySubscribe(c.id.Rights, sub.Filter) {
			c.env.Metrics.AccessDenied.WithLabelValues(deniedSubscribe).Inc()
			codes[i] = packet.NotAuthorized // 3.1.1: 0x80
			sysRefused = sysRefused || topic.IsSys(sub.Filter)
			continue
		}
		if lim.MaxSubscriptions > 0 && have+len(reqs) >= lim.MaxSubscriptions {
			if _, exists := c.s.Subscriptions()[sub.Filter]; !exists {
				codes[i] = packet.QuotaExceeded
				continue
			}
		}
		reqs = append(reqs, SubRequest{Filter: sub.Filter, From: from, Opts: router.Options{
			QoS: min(sub.QoS, 2), NoLocal: sub.NoLocal, RetainAsPublished: sub.RetainAsPublished,
			RetainHandling: sub.RetainHandling, ID: id,
		}})
		idx = append(idx, i)
	}
	ack := &packet.Suback{PacketID: p.PacketID, Codes: codes}
	switch {
	case ferr != nil && c.version == packet.V5:
		ack.Props.SetReasonString(ferr.Error())
	case sysRefused && c.version == packet.V5 && c.problemInfo:
		ack.Props.SetReasonString(SysRefusal)
	}
	if len(reqs) == 0 {
		c.respond(ack, false)
		return nil
	}
	sl := c.reserve(ack, 1)
	c.env.Hub.Subscribe(c.s, reqs, func(granted []packet.ReasonCode) {
		for j, code := range granted {
			codes[idx[j]] = code
		}
		c.complete(sl)
	})
	return nil
}

func (c *Conn) onUnsubscribe(p *packet.Unsubscribe) {
	codes := make([]packet.ReasonCode, len(p.Filters))
	var filters []string
	var idx []int
	for i, f := range p.Filters {
		if err := topic.ValidateFilter(f); err != nil {
			codes[i] = packet.TopicFilterInvalid
			continue
		}
		filters = append(filters, f)
		idx = append(idx, i)
	}
	ack := &packet.Unsuback{PacketID: p.PacketID, Codes: codes}
	if len(filters) == 0 {
		c.respond(ack, false)
		return
	}
	sl := c.reserve(ack, 1)
	c.env.Hub.Unsubscribe(c.s, filters, func(res []packet.ReasonCode) {
		for j, code := range res {
			codes[idx[j]] = code
		}
		c.complete(sl)
	})
}

// onDisconnect handles the client's DISCONNECT; it reports whether the will
// must still be published.
func (c *Conn) onDisconnect(p *packet.Disconnect) (publishWill bool, err error) {
	if c.version == packet.V5 && p.Props.Has(packet.PropSessionExpiry) {
		if c.s.Expiry() == 0 && p.Props.SessionExpiry != 0 {
			return true, protocolError("session expiry set on DISCONNECT after connecting with none")
		}
		e := p.Props.SessionExpiry
		if m := c.env.Limits.MaxSessionExpiry; m > 0 && e > m {
			e = m
		}
		c.s.SetExpiry(e)
	}
	c.s.mu.Lock()
	c.w.closing = true
	c.s.mu.Unlock()
	if p.ReasonCode == packet.NormalDisconnection {
		c.noteEnd("the client disconnected")
	} else {
		c.noteEnd("the client disconnected: " + p.ReasonCode.String())
	}
	return p.ReasonCode == packet.DisconnectWithWill, nil
}
