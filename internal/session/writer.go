package session

import (
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/store"
)

const (
	maxBatchItems = 256
	maxBatchBytes = 64 << 10
)

// outItem is one packet the writer will send: a control packet, an
// acknowledgement, or a delivery.
type outItem struct {
	p     packet.Packet
	ack   ackFields
	d     Delivery
	dup   bool
	isPub bool
	isAck bool
	final bool
}

// The writer's buffers are borrowed for one run of writeLoop, so an idle
// connection holds none.
var (
	bufPool   = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
	itemsPool = sync.Pool{New: func() any { s := make([]outItem, 0, 64); return &s }}
)

// kickWriterLocked starts the writer if there may be something to send.
// Called with the session's lock held.
func (c *Conn) kickWriterLocked() {
	if c.w.writing || c.w.held || c.w.gone || c.w.finalSent {
		return
	}
	c.w.writing = true
	go c.writeLoop()
}

// writeLoop drains what is ready to send, in batches, then exits.
func (c *Conn) writeLoop() {
	s := c.s
	bp := bufPool.Get().(*[]byte)
	buf := (*bp)[:0]
	ip := itemsPool.Get().(*[]outItem)
	items := (*ip)[:0]
	defer func() {
		if cap(buf) <= maxBatchBytes*2 {
			*bp = buf[:0]
			bufPool.Put(bp)
		}
		clear(items[:cap(items)])
		*ip = items[:0]
		itemsPool.Put(ip)
	}()
	var ops store.Batch
	for {
		now := c.env.Clock.Now()
		s.mu.Lock()
		if c.w.gone {
			c.stopWritingLocked()
			s.mu.Unlock()
			return
		}
		var reload bool
		items, reload = c.collectLocked(items[:0], now, &ops)
		if len(items) == 0 {
			c.stopWritingLocked()
			s.mu.Unlock()
			c.flushOps(&ops)
			if reload {
				c.reloadSpill()
			}
			return
		}
		s.mu.Unlock()
		c.flushOps(&ops)
		if reload {
			c.reloadSpill()
		}
		var ok bool
		if buf, ok = c.send(buf, items, now); !ok {
			s.mu.Lock()
			// Nothing more can be written: the reader, which may be parked
			// waiting for responses to drain, must end the connection.
			c.w.closing = true
			c.wakeReaderLocked()
			c.stopWritingLocked()
			s.mu.Unlock()
			c.closeSocket()
			return
		}
	}
}

func (c *Conn) stopWritingLocked() {
	c.w.writing = false
	if c.w.closing && c.w.flushed != nil && (c.w.finalSent || c.w.gone) {
		select {
		case <-c.w.flushed:
		default:
			close(c.w.flushed)
		}
	}
}

// collectLocked appends what may be sent now to items.
func (c *Conn) collectLocked(items []outItem, now time.Time, ops *store.Batch) ([]outItem, bool) {
	s, lim := c.s, &c.env.Limits
	if c.w.connack != nil {
		items = append(items, outItem{p: c.w.connack})
		c.w.connack = nil
	}
	if c.w.closing {
		if !c.w.finalSent {
			c.w.finalSent = true
			if c.w.final != nil {
				items = append(items, outItem{p: c.w.final, final: true})
			}
		}
		return items, false
	}

	// Responses, in request order, as far as they are ready.
	n := 0
	for n < len(c.w.resp) && c.w.resp[n].ready && len(items) < maxBatchItems {
		sl := c.w.resp[n]
		if sl.dec || (sl.qos2 && sl.ack.ReasonCode.IsError()) {
			if c.w.inflightIn > 0 { // a PUBCOMP may end a flow of an earlier connection
				c.w.inflightIn--
			}
		} else if sl.qos2 {
			c.w.awaitRel++
		}
		if sl.p != nil {
			items = append(items, outItem{p: sl.p})
		} else {
			items = append(items, outItem{ack: sl.ack, isAck: true})
		}
		n++
	}
	if n > 0 {
		rest := copy(c.w.resp, c.w.resp[n:])
		clear(c.w.resp[rest:])
		c.w.resp = c.w.resp[:rest]
		c.wakeReaderLocked()
	}

	// After (re)binding, unacknowledged messages go again, in order.
	if c.w.resend {
		c.w.resend = false
		s.mu.inflight.Each(func(d *Delivery) {
			items = append(items, outItem{d: *d, isPub: d.state == stateWaitAck, dup: d.sentOnce})
			if d.state == stateWaitRel {
				items[len(items)-1].isAck = true
				items[len(items)-1].ack = ackFields{Kind: packet.PUBREL, PacketID: d.pid}
			}
		})
	}

	window := int(min(lim.MaxInflight, c.clientRecvMax))
	for len(items) < maxBatchItems && s.mu.queue.Len() > 0 {
		head := s.mu.queue.At(0)
		if head.QoS > 0 && s.mu.inflight.Len() >= window {
			break
		}
		d := s.mu.queue.PopFront()
		c.env.Metrics.QueuedMessages.Dec()
		if d.Msg.Expired(now) {
			c.env.Metrics.Drop(metrics.DropExpired, 1)
			if d.seq != 0 {
				deferOrAdd(ops, d.ticket, func(b *store.Batch) { b.DeleteMessage(s.ID, d.seq) })
			}
			continue
		}
		if c.id.Rights != nil && !c.id.Rights.CanReceive(d.Msg.Topic) {
			// Queued under another identity (a session resumed by a new
			// connection, rules reloaded): not for this client.
			c.env.Metrics.Drop(metrics.DropNotAuthorized, 1)
			c.env.Metrics.AccessDenied.WithLabelValues(deniedReceive).Inc()
			if d.seq != 0 {
				deferOrAdd(ops, d.ticket, func(b *store.Batch) { b.DeleteMessage(s.ID, d.seq) })
			}
			continue
		}
		if d.QoS == 0 {
			items = append(items, outItem{d: d, isPub: true})
			continue
		}
		d.state, d.sentOnce, d.sentAt = stateWaitAck, true, now.UnixNano()
		e := s.mu.inflight.Add(d)
		c.env.Metrics.InflightMessages.Inc()
		if e.seq != 0 {
			rec := e.record()
			deferOrAdd(ops, e.ticket, func(b *store.Batch) { b.PutMessage(s.ID, rec) })
		}
		items = append(items, outItem{d: *e, isPub: true})
	}
	if s.mu.queue.Len() < lim.MaxQueued {
		s.wakeSpaceLocked()
	}
	reload := s.mu.spilled > 0 && !s.mu.reloading && s.mu.queue.Len() < lim.MaxQueued/2+1
	return items, reload
}

// deferOrAdd adds a store operation to ops, or, if the publish that stored
// the message has not reached the store yet, queues it behind that publish.
func deferOrAdd(ops *store.Batch, t *Ticket, op func(*store.Batch)) {
	if t != nil {
		t.mu.Lock()
		if !t.enqueued {
			op(&t.deferred)
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
	}
	op(ops)
}

func (c *Conn) flushOps(ops *store.Batch) {
	if ops.Len() == 0 || c.env.Store == nil {
		return
	}
	b := *ops
	*ops = store.Batch{}
	c.commitBehind(&b)
}

// send encodes and writes items using buf; it reports false if the
// connection failed.
func (c *Conn) send(buf []byte, items []outItem, now time.Time) ([]byte, bool) {
	var tooLarge []uint16
	var ack packet.Ack
	buf = buf[:0]
	packets := 0
	final := false
	for i := range items {
		it := &items[i]
		if it.final {
			final = true
		}
		start := len(buf)
		var err error
		switch {
		case it.isPub:
			var ok bool
			buf, ok = c.appendPublish(buf, &it.d, it.dup, now)
			if !ok {
				c.env.Metrics.Drop(metrics.DropTooLarge, 1)
				if it.d.QoS > 0 {
					tooLarge = append(tooLarge, it.d.pid)
				}
				continue
			}
			c.env.Metrics.MessagesOut[it.d.QoS].Inc()
		case it.isAck:
			ack = packet.Ack{Kind: it.ack.Kind, PacketID: it.ack.PacketID, ReasonCode: it.ack.ReasonCode}
			buf, err = ack.Append(buf, c.version)
			if err != nil {
				c.logger().Error("cannot encode acknowledgement", "err", err)
				buf = buf[:start]
				continue
			}
		default:
			buf, err = it.p.Append(buf, c.version)
			if err != nil {
				c.logger().Error("cannot encode packet", "packet", packet.Describe(it.p), "err", err)
				buf = buf[:start]
				continue
			}
		}
		packets++
		if len(buf) >= maxBatchBytes {
			if !c.write(buf, packets) {
				return buf, false
			}
			buf, packets = buf[:0], 0
		}
	}
	if len(buf) > 0 && !c.write(buf, packets) {
		return buf, false
	}
	if len(tooLarge) > 0 {
		// A message the client cannot accept is discarded as if delivered.
		for _, p := range tooLarge {
			_ = c.completeOutbound(&packet.Ack{Kind: ackKindFor(c, p), PacketID: p})
		}
	}
	if final {
		c.s.mu.Lock()
		c.stopWritingLocked()
		c.s.mu.Unlock()
		c.closeSocket()
	}
	return buf, true
}

func ackKindFor(c *Conn, pid uint16) packet.Type {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if d := c.s.mu.inflight.Find(pid); d != nil && d.QoS == 2 {
		d.state = stateWaitRel
		return packet.PUBCOMP
	}
	return packet.PUBACK
}

// write writes b with a write deadline. The deadline moves at most every
// quarter of the write timeout (a timer update per write is measurable), so
// a write may get between 3/4 and all of the timeout.
func (c *Conn) write(b []byte, packets int) bool {
	if now, wt := c.env.Clock.Now(), c.env.Limits.WriteTimeout; now.Sub(c.writeDeadline) >= wt/4 {
		_ = c.nc.SetWriteDeadline(now.Add(wt))
		c.writeDeadline = now
	}
	n, err := c.nc.Write(b)
	c.env.Metrics.BytesOut.Add(float64(n))
	c.env.Metrics.PacketsOut.Add(float64(packets))
	if err != nil {
		c.logger().Debug("write failed", "err", err)
		c.noteEnd("write failed: " + err.Error())
		return false
	}
	return true
}

// appendPublish encodes a delivery for this connection: topic alias, the
// remaining expiry, subscription ids. It reports false (and appends
// nothing) when the packet exceeds the client's Maximum Packet Size.
func (c *Conn) appendPublish(buf []byte, d *Delivery, dup bool, now time.Time) ([]byte, bool) {
	m := d.Msg
	pub := &packet.Publish{Topic: m.Topic, QoS: d.QoS, Retain: d.Retain, Dup: dup && d.QoS > 0, PacketID: d.pid, Payload: m.Payload}
	newAlias := uint16(0)
	if c.version == packet.V5 {
		pr := &pub.Props
		if m.PayloadFormat != 0 {
			pr.SetPayloadFormat(m.PayloadFormat)
		}
		if m.ContentType != "" {
			pr.SetContentType(m.ContentType)
		}
		if m.ResponseTopic != "" {
			pr.SetResponseTopic(m.ResponseTopic)
		}
		if len(m.CorrelationData) > 0 {
			pr.SetCorrelationData(m.CorrelationData)
		}
		if len(m.User) > 0 {
			pr.User = userProps(m.User)
		}
		if v, ok := m.ExpiryInterval(now); ok {
			pr.SetMessageExpiry(v)
		}
		pr.SubscriptionIDs = d.IDs
		if c.clientAliasMax > 0 {
			if a, ok := c.aliasOut[m.Topic]; ok {
				pr.SetTopicAlias(a)
				pub.Topic = ""
			} else if c.nextAlias < c.clientAliasMax {
				c.nextAlias++
				newAlias = c.nextAlias
				if c.aliasOut == nil {
					c.aliasOut = map[string]uint16{}
				}
				c.aliasOut[m.Topic] = newAlias
				pr.SetTopicAlias(newAlias)
			}
		}
	}
	start := len(buf)
	out, err := pub.Append(buf, c.version)
	if err != nil || (c.clientMaxPacket > 0 && uint32(len(out)-start) > c.clientMaxPacket) {
		if newAlias != 0 {
			delete(c.aliasOut, m.Topic)
			c.nextAlias--
		}
		if err != nil {
			c.logger().Error("cannot encode PUBLISH", "topic", m.Topic, "err", err)
		}
		return out[:start], false
	}
	return out, true
}

func userProps(u []message.UserProperty) []packet.UserProperty {
	out := make([]packet.UserProperty, len(u))
	for i, p := range u {
		out[i] = packet.UserProperty{Key: p.Key, Value: p.Value}
	}
	return out
}

// reloadSpill brings persisted messages that overflowed the in-memory queue
// back into it as it drains.
func (c *Conn) reloadSpill() {
	s, lim := c.s, &c.env.Limits
	s.mu.Lock()
	if s.mu.reloading || s.mu.spilled == 0 || c.env.Store == nil {
		s.mu.Unlock()
		return
	}
	s.mu.reloading = true
	from := s.mu.spillFrom
	limit := min(lim.MaxQueued-s.mu.queue.Len(), s.mu.spilled)
	s.mu.Unlock()

	var loaded []Delivery
	err := c.env.Store.LoadMessagesFrom(s.ID, from, limit, func(q *store.QueuedMessage) error {
		loaded = append(loaded, fromRecord(q))
		return nil
	})
	if err != nil {
		c.logger().Error("reloading spilled messages failed", "err", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.reloading = false
	for _, d := range loaded {
		if d.seq < s.mu.spillFrom || s.mu.spilled == 0 {
			continue
		}
		d.pid, d.state, d.sentOnce = 0, stateQueued, false
		s.mu.queue.PushBack(d)
		c.env.Metrics.QueuedMessages.Inc()
		s.mu.spilled--
		s.mu.spillFrom = d.seq + 1
	}
	if s.mu.spilled > 0 && len(loaded) < limit {
		// The newest spilled writes have not reached the store yet: look again shortly.
		c.env.Clock.AfterFunc(20*time.Millisecond, func() {
			s.mu.Lock()
			c.kickWriterLocked()
			s.mu.Unlock()
		})
	}
	if len(loaded) > 0 {
		c.kickWriterLocked()
	}
}
