package peer

import (
	"fmt"
	"time"
)

// Buffer sizes of a connection: the reader's buffered reader, the largest
// frame buffer the reader keeps between frames, and how many batches' worth
// of write buffer the writer keeps (a hand-over's larger buffer is
// returned).
const (
	readBufferSize   = 64 << 10
	keepReadBuffer   = 4 << 20
	keepWriteBatches = 4
)

// writeLoop is a connection's writer: it sends interest changes, the
// reach announcement, control and transit frames, then the retained sync
// and the outboxes routed through this link (this peer's own, and those of
// peers this one is the transit node for) with the acknowledgements due to
// them, in batches, one write per round, and a ping when idle. It returns
// when the connection fails (the error), the reader stops, the link is
// removed, or a newer connection is offered (returned).
func (l *Link) writeLoop(c *conn) (*accepted, error) {
	opts := &l.mgr.opts
	clk := l.mgr.clock
	var (
		buf       []byte
		sent      uint64 // interest version announced on this connection
		reachSent uint64 // reach version announced on this connection
		first     = true
		lastSent  = clk.Now()
		col       collector
	)
	ping := clk.NewTimer(opts.PingInterval)
	defer ping.Stop()
	ackTimer := clk.NewTimer(opts.AckDelay) // armed while an acknowledgement waits
	ackTimer.Stop()
	defer ackTimer.Stop()
	for {
		buf = buf[:0]
		if f, ok := l.mgr.interest.since(sent, first); ok {
			buf = appendInterest(buf, f)
			sent = f.To
		}
		if v, f := l.mgr.currentReach(); v != reachSent || first {
			buf = appendReach(buf, f)
			reachSent = v
		}
		first = false
		nRetained := 0
		l.mu.Lock()
		if l.mu.overflow {
			l.mu.Unlock()
			return nil, errOverflow
		}
		for _, f := range l.mu.ctrl {
			buf = append(buf, f...)
		}
		clear(l.mu.ctrl)
		l.mu.ctrl, l.mu.ctrlBytes = l.mu.ctrl[:0], 0
		nTransit := len(l.mu.transit)
		for _, f := range l.mu.transit {
			buf = append(buf, f...)
		}
		clear(l.mu.transit)
		l.mu.transit, l.mu.transitBytes = l.mu.transit[:0], 0
		if len(buf) < opts.BatchBytes && len(l.mu.sync) > 0 {
			n, size := 0, 0
			for n < len(l.mu.sync) && (n == 0 || size < opts.BatchBytes) {
				size += len(l.mu.sync[n])
				n++
			}
			buf = appendRetainedBatch(buf, l.mu.sync[:n])
			clear(l.mu.sync[:n])
			l.mu.sync = l.mu.sync[n:]
			if len(l.mu.sync) == 0 {
				l.mu.sync = nil
			}
			nRetained = n
		}
		more := len(l.mu.ctrl) > 0 || len(l.mu.sync) > 0
		l.mu.Unlock()
		var (
			carried bool
			ackWake time.Time
		)
		buf, carried, ackWake = col.collect(l, buf, max(opts.BatchBytes-len(buf), 1))
		more = more || carried
		if len(buf) == 0 {
			var ackC <-chan time.Time
			if !ackWake.IsZero() {
				ackTimer.Reset(ackWake.Sub(clk.Now()))
				ackC = ackTimer.C()
			}
			select {
			case <-l.wake:
				continue
			case <-ackC:
				continue
			case <-ping.C():
				ping.Reset(opts.PingInterval)
				if clk.Now().Sub(lastSent) < opts.PingInterval {
					continue
				}
				buf = appendPing(buf)
			case err := <-c.readerDone:
				c.readerDone <- err // serve reads it again
				return nil, err
			case <-l.ctx.Done():
				return nil, nil
			case a := <-l.offer:
				return &a, nil
			}
		}
		if len(buf) > opts.MaxFrame {
			// A single control frame beyond the peer's limit would only get
			// this connection closed by the peer; say so here instead.
			l.mgr.log.Warn("peer: frame over the size limit", "peer", l.id, "bytes", len(buf))
		}
		_ = c.nc.SetWriteDeadline(clk.Now().Add(opts.WriteTimeout))
		if _, err := c.nc.Write(buf); err != nil {
			return nil, fmt.Errorf("peer: write to %s: %w", l.id, err)
		}
		lastSent = clk.Now()
		l.lm.sentBytes.Add(float64(len(buf)))
		if nRetained > 0 {
			l.lm.sentMessages.Add(float64(nRetained))
		}
		if nTransit > 0 {
			l.lm.transitForwarded.Add(float64(nTransit))
		}
		col.written()
		if more {
			l.poke()
		}
		if cap(buf) > keepWriteBatches*opts.BatchBytes {
			buf = nil // do not keep a hand-over's buffer around
		}
	}
}

// collector gathers, for one round of a link's writer, the outboxes routed
// through that link and the acknowledgements due on those routes.
type collector struct {
	items  []*Publish
	sent   []sentCount // per outbox, counted once the write succeeds
	routed []*Link     // the links whose path is this one, this round
}

type sentCount struct {
	lm *linkMetrics
	n  int
}

// collect appends to buf, within about budget bytes, the messages waiting
// in every outbox whose path is x (x's own as publish batches, the others'
// as transit frames), then the acknowledgements due to the peers reached
// through x: all of them if the round writes anything, else those that
// may not wait longer. It reports whether messages were left waiting, and
// when the next waiting acknowledgement must go (zero: none waits).
func (col *collector) collect(x *Link, buf []byte, budget int) (out []byte, more bool, ackWake time.Time) {
	m := x.mgr
	col.sent = col.sent[:0]
	col.routed = col.routed[:0]
	for _, l := range m.linkList() {
		l.mu.Lock()
		if l.mu.via != x {
			l.mu.Unlock()
			continue
		}
		col.routed = append(col.routed, l)
		var h batchHeader
		n := 0
		limit := budget
		if l != x { // through a transit node: within the window
			limit = min(limit, m.opts.TransitWindow-l.mu.out.sentSize)
		}
		if limit > 0 && l.mu.out.pending.live > 0 {
			before := l.mu.out.live()
			col.items = l.mu.out.take(col.items[:0], limit)
			n = len(col.items)
			h = batchHeader{Inc: l.mu.out.inc, Gen: l.mu.out.gen, Base: l.mu.out.base()}
			if l.mu.out.live() < before {
				l.freeSpaceLocked() // QoS 0 messages left the outbox
			}
		}
		// More waiting, and room to send it (a closed window opens with an
		// acknowledgement, which pokes this writer).
		more = more || (l.mu.out.pending.live > 0 && (l == x || m.opts.TransitWindow > l.mu.out.sentSize))
		live, qbytes, unacked := l.mu.out.live(), l.mu.out.bytes(), l.mu.out.unacked()
		l.mu.Unlock()
		if n == 0 {
			continue
		}
		l.lm.queueMessages.Set(float64(live))
		l.lm.queueBytes.Set(float64(qbytes))
		l.lm.unacked.Set(float64(unacked))
		start := len(buf)
		if l == x {
			buf = appendPublishBatch(buf, h, col.items)
		} else {
			var at int
			buf, at = beginTransit(buf, transitHeader{From: m.cfg.NodeID, To: l.id, Type: framePublish})
			buf = endFrame(appendPublishBody(buf, h, col.items), at)
		}
		budget -= len(buf) - start
		col.sent = append(col.sent, sentCount{l.lm, n})
		clear(col.items)
	}
	now := m.clock.Now()
	send := len(buf) > 0
	for _, l := range col.routed {
		a, ok, wake := m.origins.ackFor(l.id, now, send, &m.opts)
		switch {
		case ok && l == x:
			buf = appendAck(buf, a)
		case ok:
			var at int
			buf, at = beginTransit(buf, transitHeader{From: m.cfg.NodeID, To: l.id, Type: frameAck})
			buf = endFrame(appendAckBody(buf, a), at)
		case !wake.IsZero() && (ackWake.IsZero() || wake.Before(ackWake)):
			ackWake = wake
		}
	}
	clear(col.routed)
	return buf, more, ackWake
}

// written counts what the round sent, once its write succeeded.
func (col *collector) written() {
	for _, s := range col.sent {
		s.lm.sentMessages.Add(float64(s.n))
	}
	col.sent = col.sent[:0]
}

// readLoop is a connection's reader: it dispatches frames to the handler
// until the connection fails.
func (l *Link) readLoop(c *conn) error {
	m := l.mgr
	opts := &m.opts
	clk := m.clock
	var (
		buf []byte
		rin remoteInterest
		rd  batchReader
	)
	for {
		_ = c.nc.SetReadDeadline(clk.Now().Add(opts.ReadTimeout))
		typ, body, nbuf, err := readFrame(c.br, buf, opts.MaxFrame)
		buf = nbuf
		if err != nil {
			return fmt.Errorf("peer: read from %s: %w", l.id, err)
		}
		l.lastRecv.Store(clk.Now().UnixNano())
		l.lm.recvBytes.Add(float64(len(body) + frameHeaderLen))
		l.busy.Store(true)
		err = l.dispatch(typ, body, &rin, &rd, c)
		l.busy.Store(false)
		if err != nil {
			return err
		}
		if cap(buf) > keepReadBuffer && len(body) < readBufferSize {
			buf = nil // return a large frame's buffer
		}
	}
}

// dispatch handles one frame read from the connection.
func (l *Link) dispatch(typ byte, body []byte, rin *remoteInterest, rd *batchReader, c *conn) error {
	m := l.mgr
	h := m.cfg.Handler
	switch typ {
	case frameInterest:
		f, err := decodeInterest(body)
		if err != nil {
			return err
		}
		if !rin.apply(f) {
			return fmt.Errorf("%w: interest delta %d..%d does not follow version %d", ErrCorrupt, f.From, f.To, rin.version)
		}
		h.Interest(l.id, f.Full, f.Add, f.Remove)
	case framePublish, frameAck, frameRetained:
		return m.receiveFrom(l.id, typ, body, rd)
	case frameTransit:
		return m.receiveTransit(l, body, rd)
	case frameReach:
		r, err := decodeReach(body)
		if err != nil {
			return err
		}
		l.setReach(r)
		m.reroute()
	case frameRequest:
		r, err := decodeRequest(body)
		if err != nil {
			return err
		}
		r.Body = append([]byte(nil), r.Body...)
		m.serveRequest(l, c.n, r)
	case frameResponse:
		r, err := decodeResponse(body)
		if err != nil {
			return err
		}
		r.Body = append([]byte(nil), r.Body...)
		l.mu.Lock()
		ch := l.mu.pending[r.ID]
		delete(l.mu.pending, r.ID)
		l.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	case framePing:
		if len(body) != 0 {
			return fmt.Errorf("%w: ping with a body", ErrCorrupt)
		}
	default:
		return fmt.Errorf("%w: unexpected %s frame", ErrCorrupt, frameName(typ))
	}
	return nil
}

// setReach records the peer's reach announcement on this connection.
func (l *Link) setReach(r reachFrame) {
	rs := &reachSets{heard: make(map[string]bool, len(r.Heard)), sends: make(map[string]bool, len(r.Sends))}
	for _, id := range r.Heard {
		rs.heard[id] = true
	}
	for _, id := range r.Sends {
		rs.sends[id] = true
	}
	l.mu.Lock()
	l.mu.reach = rs
	l.mu.Unlock()
}
