package session

import (
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/store"
)

// batch holds the writes a connection's reader has taken on while it
// handles the packets of one read: connections (its own among them) whose
// writer role it holds because what it did gave them something to send (a
// delivery, an acknowledgement). It writes them, inline and without
// blocking, before it reads again or waits for anything (flush). So a
// message at a moderate rate reaches its subscriber's socket from the
// publisher's goroutine, with no goroutine started or woken; a read that
// brought many packets costs one write per connection; and a fan-out
// writes each subscriber once.
//
// A batch is open while its reader handles what it read; only an open
// batch takes connections on (add). The lock makes that safe from any
// goroutine: a connection is added only while the reader will flush again.
type batch struct {
	owner *Conn // the reader's own connection
	mu    sync.Mutex
	open  bool
	busy  bool // the read filled the reader's buffer: more is waiting
	conns []*Conn
}

// add takes c on if the batch is open; the caller holds c's writer role.
func (b *batch) add(c *Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return false
	}
	b.conns = append(b.conns, c)
	return true
}

// reopen opens the batch for the packets of a new read; busy says the
// read filled the space it was given.
func (b *batch) reopen(busy bool) {
	b.mu.Lock()
	b.open, b.busy = true, busy
	b.mu.Unlock()
}

// smallBatch is the capacity of a flushed batch's slice that is kept for the
// next read; a larger one (a fan-out) goes, so an idle publisher does not
// keep it.
const smallBatch = 16

// flush closes the batch and writes every connection it took on. It runs on
// the reader's goroutine before it blocks, and in Deliver before a publisher
// waits for room (back-pressure must not hold back writes to others).
func (b *batch) flush() {
	b.mu.Lock()
	b.open = false
	conns, busy := b.conns, b.busy
	b.conns = nil
	b.mu.Unlock()
	if len(conns) == 0 {
		return
	}
	defer func() {
		// Only after a panic is any left: hand them on rather than leave
		// them claimed by a batch nobody will flush.
		for _, c := range conns {
			if c != nil {
				c.handOff()
			}
		}
	}()
	f := flushers.Get().(*flusher)
	f.now = b.owner.env.Clock.Now()
	// A reader that is busy (its read filled its buffer) writes only its own
	// connection inline, since its client waits for those acknowledgements
	// to send more, and leaves the others to their writer goroutines: under
	// load a writer per connection, on another core, batches as well and
	// keeps the reader reading. Otherwise deliveries go first (they are what
	// end-to-end latency measures), then the reader's own connection.
	own := false
	for i, c := range conns {
		switch {
		case c == b.owner:
			own = true
			if busy {
				c.flushInline(f)
			} else {
				continue // last
			}
		case busy:
			c.handOff()
		default:
			c.flushInline(f)
		}
		conns[i] = nil
	}
	if own && !busy {
		for i, c := range conns {
			if c != nil {
				c.flushInline(f)
				conns[i] = nil
			}
		}
	}
	f.shared.reset()
	if cap(f.buf) > 2*maxBatchBytes {
		f.buf = make([]byte, 0, 4096)
	}
	flushers.Put(f)
	if cap(conns) <= smallBatch {
		b.mu.Lock()
		if b.conns == nil {
			b.conns = conns[:0]
		}
		b.mu.Unlock()
	}
}

// flushSafely flushes b from a connection's exit path, where a panic must
// not escape: it is logged and counted like any other in a connection.
func (c *Conn) flushSafely() {
	defer func() {
		if r := recover(); r != nil {
			c.env.Metrics.Panics.Inc()
			c.env.Log.Error("panic writing a batch", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	c.rb.flush()
}

// flusher is what one flush of a batch borrows: buffers, and the encoding
// the subscribers of a fan-out share.
type flusher struct {
	now    time.Time
	buf    []byte
	items  []outItem
	ops    store.Batch
	shared sharedPublish
}

var flushers = sync.Pool{New: func() any {
	return &flusher{buf: make([]byte, 0, 4096), items: make([]outItem, 0, 64)}
}}

// handOff gives the writer role, which a batch holds, to the writer
// goroutine.
func (c *Conn) handOff() {
	c.s.mu.Lock()
	if c.w.gone {
		c.stopWritingLocked()
	} else {
		c.startWriterLocked()
	}
	c.s.mu.Unlock()
}

// inlineTurns bounds the collect-and-write turns an inline flush takes for
// one connection before it leaves the rest to the writer goroutine: a
// connection that keeps getting more to send while it is written is busy,
// and a publisher's goroutine should not become its writer.
const inlineTurns = 4

// flushInline writes what c has to send from the calling goroutine, which
// holds c's writer role through a batch: a few turns of collecting and
// writing without blocking. It hands the role to the writer goroutine when
// the socket is full, when the connection is not plain TCP (TLS,
// WebSocket), or when a turn is not the steady kind (CONNACK, a resend after
// reconnecting, closing).
func (c *Conn) flushInline(f *flusher) {
	s := c.s
	now := f.now
	for turn := 0; ; turn++ {
		if turn > 0 {
			now = c.env.Clock.Now()
		}
		s.mu.Lock()
		if c.w.gone {
			c.stopWritingLocked()
			s.mu.Unlock()
			return
		}
		if c.raw == nil || turn == inlineTurns || c.w.connack != nil || c.w.closing || c.w.resend {
			c.startWriterLocked()
			s.mu.Unlock()
			return
		}
		var reload, held bool
		f.items, reload, held = c.collectLocked(f.items[:0], now, &f.ops, false)
		if len(f.items) == 0 {
			if held {
				c.startWriterLocked() // it may wait for the store (writer.go)
			} else {
				c.stopWritingLocked()
			}
		}
		s.mu.Unlock()
		c.flushOps(&f.ops)
		if reload {
			c.reloadSpill()
		}
		if len(f.items) == 0 {
			return
		}
		var tooLarge []uint16
		f.buf, _, tooLarge, _ = c.encode(f.buf[:0], f.items, now, &f.shared)
		clear(f.items)
		n, err := c.raw.TryWrite(f.buf)
		c.env.Metrics.BytesOut.Add(float64(n))
		c.discardTooLarge(tooLarge)
		if err != nil || n < len(f.buf) {
			// The rest goes first when the writer goroutine runs; an
			// error is for its blocking write to report.
			c.pending = append(c.pending, f.buf[n:]...)
			s.mu.Lock()
			c.startWriterLocked()
			s.mu.Unlock()
			return
		}
		if held {
			s.mu.Lock()
			c.startWriterLocked()
			s.mu.Unlock()
			return
		}
	}
}
