package session

import (
	"context"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/store"
)

const (
	// maxBatchItems and maxBatchBytes bound what one turn of the writer
	// collects: the bytes are estimated before encoding, and a packet
	// larger than the bound still goes, alone.
	maxBatchItems = 256
	maxBatchBytes = 64 << 10
	// writerLinger is how long a writer goroutine that has run out of work
	// waits for more before it exits: a busy connection keeps one writer
	// across its bursts, an idle one keeps none (its memory is a parked
	// reader and a small buffer).
	writerLinger = 2 * time.Millisecond
	// spillRecheck is how soon a reload of spilled messages looks again
	// when the newest spilled writes had not reached the store yet.
	spillRecheck = 20 * time.Millisecond
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

// The writer's buffers are borrowed for one run of writeLoop or one flush of
// a batch, so an idle connection holds none.
var (
	bufPool   = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
	itemsPool = sync.Pool{New: func() any { s := make([]outItem, 0, 64); return &s }}
)

func borrowBuffers() (*[]byte, *[]outItem) {
	return bufPool.Get().(*[]byte), itemsPool.Get().(*[]outItem)
}

func returnBuffers(bp *[]byte, buf []byte, ip *[]outItem, items []outItem) {
	if cap(buf) <= maxBatchBytes*2 {
		*bp = buf[:0]
		bufPool.Put(bp)
	}
	clear(items[:cap(items)])
	*ip = items[:0]
	itemsPool.Put(ip)
}

// The writer role. One party at a time writes a connection's socket: the
// holder of the role (c.w.writing, under the session's lock). It is taken
// by whoever finds the role free when there may be something to send
// (kickWriterLocked), and is held by
//   - a reader's batch (see batch.go), which writes the connection from the
//     reader's goroutine, without blocking, once that reader has handled
//     the packets of its current read; or
//   - the connection's writer goroutine, which blocks on the socket when it
//     must, batches under load, and lingers for writerLinger once idle.
// A kick that finds the role held does nothing: the holder collects again
// before it lets go, under the same lock (collectLocked returning nothing).
// Bytes a non-blocking write could not send (c.pending) go to the writer
// goroutine, which sends them before anything else, so the order on the
// wire is the order of collection.

// kickWriterLocked takes the writer role, if it is free, for someone to send
// what the connection may have to send: the open batch b of a publisher's
// reader (nil: none), else this connection's own reader's batch if it is
// open, else the writer goroutine. Called with the session's lock held.
func (c *Conn) kickWriterLocked(b *batch) {
	if c.w.writing || c.w.held || c.w.gone || c.w.finalSent {
		return
	}
	c.w.writing = true
	if b != nil && b.add(c) {
		return
	}
	if b != &c.rb && c.rb.add(c) {
		return
	}
	c.startWriterLocked()
}

// startWriterLocked hands the writer role, which the caller holds, to the
// writer goroutine: the lingering one, or a new one.
func (c *Conn) startWriterLocked() {
	if c.w.running {
		// Not holding the role, a running writer is lingering.
		if c.w.idle {
			c.w.idle = false
			select {
			case c.w.wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
		return
	}
	c.w.running = true
	c.w.idle = false
	c.w.wake = make(chan struct{}, 1)
	go c.writeLoop(c.w.wake)
}

// writeLoop is the writer goroutine: it sends what is left of an inline
// write, then what is ready, in batches; once there is nothing to send it
// lets go of the role and lingers, and exits if no work comes.
func (c *Conn) writeLoop(wake chan struct{}) {
	s := c.s
	bp, ip := borrowBuffers()
	buf, items := (*bp)[:0], (*ip)[:0]
	defer func() { returnBuffers(bp, buf, ip, items) }()
	var t clock.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	var ops store.Batch
	for {
		if len(c.pending) > 0 {
			ok := c.write(c.pending, 0)
			c.pending = nil // rare: not worth keeping on an idle connection
			if !ok {
				c.writeFailed()
				return
			}
		}
		now := c.env.Clock.Now()
		s.mu.Lock()
		if c.w.gone {
			c.stopWritingLocked()
			c.exitWriterLocked()
			s.mu.Unlock()
			return
		}
		var reload, held bool
		items, reload, held = c.collectLocked(items[:0], now, &ops, true)
		if len(items) == 0 {
			c.stopWritingLocked()
			c.w.idle = true
			s.mu.Unlock()
			c.flushOps(&ops)
			if reload {
				c.reloadSpill()
			}
			if t == nil {
				t = c.env.Clock.NewTimer(writerLinger)
			} else {
				t.Reset(writerLinger)
			}
			if !c.linger(wake, t) {
				return
			}
			continue
		}
		s.mu.Unlock()
		if held {
			c.flushOpsDurable(&ops)
		} else {
			c.flushOps(&ops)
		}
		if reload {
			c.reloadSpill()
		}
		var packets int
		var tooLarge []uint16
		var final bool
		buf, packets, tooLarge, final = c.encode(buf[:0], items, now, nil)
		clear(items)
		if len(buf) > 0 && !c.write(buf, packets) {
			c.writeFailed()
			return
		}
		c.discardTooLarge(tooLarge)
		if final {
			s.mu.Lock()
			c.stopWritingLocked()
			c.exitWriterLocked()
			s.mu.Unlock()
			c.closeSocket()
			return
		}
	}
}

// linger waits, without the writer role, until the role is handed back
// (true) or writerLinger passes or the connection ends (false: the
// goroutine must exit; it is recorded as gone).
func (c *Conn) linger(wake chan struct{}, t clock.Timer) bool {
	s := c.s
	for {
		timedOut := false
		select {
		case <-wake:
		case <-t.C():
			timedOut = true
		}
		s.mu.Lock()
		if !c.w.idle {
			s.mu.Unlock()
			if !timedOut {
				t.Stop()
			}
			return true
		}
		if timedOut || c.w.gone {
			c.exitWriterLocked()
			s.mu.Unlock()
			return false
		}
		s.mu.Unlock() // a stale wake-up: keep waiting
	}
}

// exitWriterLocked records that the writer goroutine is exiting.
func (c *Conn) exitWriterLocked() {
	c.w.running, c.w.idle, c.w.wake = false, false, nil
}

// writeFailed ends a writer goroutine whose write failed: nothing more can
// be written, and the reader, which may be parked waiting for responses to
// drain, must end the connection.
func (c *Conn) writeFailed() {
	s := c.s
	s.mu.Lock()
	c.w.closing = true
	c.wakeReaderLocked()
	c.stopWritingLocked()
	c.exitWriterLocked()
	s.mu.Unlock()
	c.closeSocket()
}

// wakeWriterLocked makes a lingering writer goroutine look at the
// connection again (it exits if the connection has ended).
func (c *Conn) wakeWriterLocked() {
	if c.w.running && c.w.idle {
		select {
		case c.w.wake <- struct{}{}:
		default:
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

// Held deliveries. A delivery of a sequenced topic's record to a
// persistent session must not reach the client before the store has made
// durable its stored copy, the session's cursor past it and its packet id
// (SentAwaitingAck). Sent earlier, a crash of the node would send the
// record again as a new message: from the log (the cursor not written) or
// from the stored queue with a new packet id (the id not written); a QoS 2
// receiver cannot tell either from a new message. When the delivery is
// next to go (nothing queued before it, room in the window), Deliver takes
// it into the window at once and its id goes in the publish's batch with
// its copy and cursor (takeHeldLocked): one commit. Otherwise it waits in
// the queue and the writer records its id in its ops when it collects it:
// a second commit. One taken by Deliver is collected once its publish's
// batch is durable (Ticket.waitDurable: Committed queues an empty batch
// right behind it, which the store completes with it). One from the queue
// is collected only once its publish's batch is in the store's queue
// (Ticket.waitFor; else the writer stops there and Committed kicks it),
// and the writer goroutine writes a turn that collected one only after
// its ops are durable (flushOpsDurable): the store completes batches in
// the order they are queued, so the delivery's batch is durable too. The
// wait is the store's group commit, shared by
// every connection waiting: no fsync per message, and nothing overtakes a
// held delivery. The inline flush (batch.go) never waits: it hands the
// connection to its writer goroutine at a held delivery. Likewise the
// PUBREL answering the PUBREC of a held QoS 2 delivery waits for its
// ReleaseSent state (reader.go): sent before, a crash would send the
// message again under the packet id the client has released.

// collectLocked appends what may be sent now to items. mayWait says the
// caller can wait for the store: held reports that items hold a held
// delivery (or its resend), to be written only once ops are durable; when
// !mayWait, held reports that collection stopped at a held delivery, which
// the writer goroutine must take on.
func (c *Conn) collectLocked(items []outItem, now time.Time, ops *store.Batch, mayWait bool) (_ []outItem, reload, held bool) {
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
		return items, false, false
	}

	// Responses, in request order, as far as they are ready.
	n := 0
	bytes := 0
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

	// Deliveries Deliver took into the window (takeHeldLocked) go first:
	// nothing was queued before them. They wait for their batch to be
	// durable, which carries their packet ids.
	if s.mu.unsent > 0 {
		if !mayWait {
			return items, false, true
		}
		if !c.unsentDurableLocked() {
			return items, false, held // kicked once their batches are durable
		}
	}

	// After (re)binding, unacknowledged messages go again, in order.
	if c.w.resend {
		c.w.resend = false
		s.mu.unsent = 0
		s.mu.inflight.Each(func(d *Delivery) {
			// A held delivery's state may have been written by a batch
			// still in the store's queue (a PUBREC's ReleaseSent): the
			// turn waits for the queue (flushOpsDurable) before it
			// sends again.
			held = held || d.hold
			items = append(items, outItem{d: *d, isPub: d.state == stateWaitAck, dup: d.sentOnce})
			if d.state == stateWaitRel {
				items[len(items)-1].isAck = true
				items[len(items)-1].ack = ackFields{Kind: packet.PUBREL, PacketID: d.pid}
			}
			if d.unsent {
				d.unsent, d.sentOnce, d.sentAt = false, true, now.UnixNano()
			}
		})
	}
	if s.mu.unsent > 0 {
		f := &s.mu.inflight.q
		for i := max(0, f.Len()-s.mu.unsent); i < f.Len(); i++ {
			if d := f.At(i); d.unsent && !d.acked {
				d.unsent, d.sentOnce, d.sentAt = false, true, now.UnixNano()
				items = append(items, outItem{d: *d, isPub: true})
			}
		}
		s.mu.unsent = 0
	}

	window := int(min(lim.MaxInflight, c.clientRecvMax))
	for len(items) < maxBatchItems && bytes < maxBatchBytes && s.mu.queue.Len() > 0 {
		head := s.mu.queue.At(0)
		if head.QoS > 0 && s.mu.inflight.Len() >= window {
			break
		}
		if head.hold {
			if !mayWait {
				held = true
				break
			}
			if t := head.ticket; t != nil && !t.waitFor(s) {
				break // kicked once its batch is queued
			}
			held = true
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
		bytes += estimateSize(d.Msg)
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
	reload = s.mu.spilled > 0 && !s.mu.reloading && s.mu.queue.Len() < lim.MaxQueued/2+1
	return items, reload, held
}

// unsentDurableLocked reports whether the publish batches of the
// deliveries taken into the window unsent (the last s.mu.unsent entries at
// most) are all durable; if not, the writer is kicked once they are.
func (c *Conn) unsentDurableLocked() bool {
	s := c.s
	f := &s.mu.inflight.q
	for i := max(0, f.Len()-s.mu.unsent); i < f.Len(); i++ {
		if d := f.At(i); d.unsent && !d.acked && d.ticket != nil && !d.ticket.waitDurable(s) {
			return false
		}
	}
	return true
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

// flushOpsDurable commits ops and waits until they, and every batch queued
// on the store before them, are durable (an empty batch too: the store
// completes batches in order). A failed write is logged and the turn is
// sent anyway: the store has failed for every session.
func (c *Conn) flushOpsDurable(ops *store.Batch) {
	if c.env.Store == nil {
		return
	}
	b := *ops
	*ops = store.Batch{}
	done := make(chan struct{})
	if err := c.env.Store.Commit(context.Background(), &b, func(err error) {
		if err != nil {
			c.logger().Error("store write failed", "err", err)
		}
		close(done)
	}); err != nil {
		c.logger().Error("store write failed", "err", err)
		return
	}
	<-done
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
		c.env.Clock.AfterFunc(spillRecheck, func() {
			s.mu.Lock()
			c.kickWriterLocked(nil)
			s.mu.Unlock()
		})
	}
	if len(loaded) > 0 {
		c.kickWriterLocked(nil)
	}
}
