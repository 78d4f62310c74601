package peer

import "fmt"

// Buffer sizes of a connection: the reader's buffered reader, the largest
// frame buffer the reader keeps between frames, and how many batches' worth
// of write buffer the writer keeps (a hand-over's larger buffer is
// returned).
const (
	readBufferSize   = 64 << 10
	keepReadBuffer   = 4 << 20
	keepWriteBatches = 4
)

// writeLoop is a connection's writer: it sends interest changes, control
// frames, then the retained sync and forwarded messages in batches, one
// write per round, and a ping when idle. It returns when the connection
// fails (the error), the reader stops, the link is removed, or a newer
// connection is offered (returned).
func (l *Link) writeLoop(c *conn) (*accepted, error) {
	opts := &l.mgr.opts
	clk := l.mgr.clock
	var (
		buf      []byte
		items    []*Publish
		sent     uint64 // interest version announced on this connection
		first    = true
		lastSent = clk.Now()
	)
	ping := clk.NewTimer(opts.PingInterval)
	defer ping.Stop()
	for {
		buf = buf[:0]
		if f, ok := l.mgr.interest.since(sent, first); ok {
			buf = appendInterest(buf, f)
			sent, first = f.To, false
		}
		nItems, nRetained := 0, 0
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
		items = l.mu.data.pop(items[:0], opts.BatchBytes)
		live, qbytes := l.mu.data.live, l.mu.data.bytes
		if len(items) > 0 && l.mu.space != nil {
			close(l.mu.space)
			l.mu.space = nil
		}
		more := len(l.mu.ctrl) > 0 || len(l.mu.sync) > 0 || l.mu.data.live > 0
		l.mu.Unlock()
		if len(items) > 0 {
			l.lm.queueMessages.Set(float64(live))
			l.lm.queueBytes.Set(float64(qbytes))
			buf = appendPublishBatch(buf, items)
			nItems = len(items)
			clear(items)
		}
		if len(buf) == 0 {
			select {
			case <-l.wake:
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
		if n := nItems + nRetained; n > 0 {
			l.lm.sentMessages.Add(float64(n))
		}
		if more {
			l.poke()
		}
		if cap(buf) > keepWriteBatches*opts.BatchBytes {
			buf = nil // do not keep a hand-over's buffer around
		}
	}
}

// readLoop is a connection's reader: it dispatches frames to the handler
// until the connection fails.
func (l *Link) readLoop(c *conn) error {
	opts := &l.mgr.opts
	clk := l.mgr.clock
	h := l.mgr.cfg.Handler
	var (
		buf []byte
		rin remoteInterest
	)
	for {
		_ = c.nc.SetReadDeadline(clk.Now().Add(opts.ReadTimeout))
		typ, body, nbuf, err := readFrame(c.br, buf, opts.MaxFrame)
		buf = nbuf
		if err != nil {
			return fmt.Errorf("peer: read from %s: %w", l.id, err)
		}
		l.lm.recvBytes.Add(float64(len(body) + frameHeaderLen))
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
		case framePublish:
			n := 0
			err := decodePublishBatch(body, func(msg []byte, direct bool, groups []string) error {
				h.Publish(l.id, msg, direct, groups)
				n++
				return nil
			})
			l.lm.recvMessages.Add(float64(n))
			if err != nil {
				return err
			}
		case frameRetained:
			n := 0
			err := decodeRetainedBatch(body, func(msg []byte) error {
				h.Retained(l.id, msg)
				n++
				return nil
			})
			l.lm.recvMessages.Add(float64(n))
			if err != nil {
				return err
			}
		case frameRequest:
			r, err := decodeRequest(body)
			if err != nil {
				return err
			}
			r.Body = append([]byte(nil), r.Body...)
			l.mgr.serveRequest(l, c.n, r)
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
		if cap(buf) > keepReadBuffer && len(body) < readBufferSize {
			buf = nil // return a large frame's buffer
		}
	}
}
