package peer

import (
	"fmt"
	"sync"
	"time"
)

// origins holds the inbox of every node that sent this node forwarded
// messages, directly or through a transit node. An inbox outlives the
// origin's link (a node removed and added again keeps its dedup state); it
// is dropped with the manager. The map and every inbox in it are guarded
// by mu; each origin's deliver mutex serialises the deliveries of its
// stream across the links they arrive on (its direct link and transit
// nodes), so that the inbox's decisions and the handler's deliveries
// happen in the same order.
type origins struct {
	mu struct {
		sync.Mutex
		m map[string]*origin
	}
}

type origin struct {
	deliver sync.Mutex // held while a batch of this origin is decided and delivered
	in      inbox      // guarded by origins.mu
}

func newOrigins() *origins {
	o := &origins{}
	o.mu.m = map[string]*origin{}
	return o
}

// get returns id's origin, creating it.
func (os *origins) get(id string) *origin {
	os.mu.Lock()
	defer os.mu.Unlock()
	o := os.mu.m[id]
	if o == nil {
		o = &origin{}
		os.mu.m[id] = o
	}
	return o
}

// observe records id's incarnation from a handshake; see inbox.observe.
func (os *origins) observe(id string, inc uint64) uint64 {
	o := os.get(id)
	os.mu.Lock()
	defer os.mu.Unlock()
	return o.in.observe(inc)
}

// ackFor returns the acknowledgement due to id, if any and if it need not
// wait any longer (see inbox.ack), and clears it; else when it will.
func (os *origins) ackFor(id string, now time.Time, send bool, opts *Options) (ackFrame, bool, time.Time) {
	os.mu.Lock()
	defer os.mu.Unlock()
	if o := os.mu.m[id]; o != nil {
		return o.in.ack(now, send, opts.ackEvery(), opts.AckDelay)
	}
	return ackFrame{}, false, time.Time{}
}

// batchReader decodes and delivers publish batches for one connection's
// reader; it keeps its buffers between frames.
type batchReader struct {
	items []publishItem
	take  []bool
}

// receive decides and delivers one publish batch of origin's stream
// (arrived directly or in transit): QoS 1/2 messages only in sequence and
// once, QoS 0 ones unless a later one was delivered (inbox). The acknowledgement
// goes out on origin's path.
func (rd *batchReader) receive(m *Manager, origin string, body []byte) error {
	if origin == m.cfg.NodeID {
		return fmt.Errorf("%w: publish batch from this node itself", ErrCorrupt)
	}
	var hdr batchHeader
	rd.items = rd.items[:0]
	err := decodePublishBatch(body, func(h batchHeader) error { hdr = h; return nil }, func(it publishItem) error {
		rd.items = append(rd.items, it)
		return nil
	})
	if err != nil {
		return err
	}
	o := m.origins.get(origin)
	o.deliver.Lock()
	defer o.deliver.Unlock()
	rd.take = rd.take[:0]
	var dups, ahead int
	m.origins.mu.Lock()
	ok, lost := o.in.admit(hdr.Inc, hdr.Gen, hdr.Base)
	for i := range rd.items {
		take := false
		switch {
		case !ok:
			dups++
		case !rd.items[i].Acked:
			if o.in.acceptQoS0(rd.items[i].Seq) == deliver {
				take = true
			} else {
				dups++
			}
		default:
			switch o.in.accept(rd.items[i].Seq) {
			case deliver:
				take = true
			case duplicate:
				dups++
			case early:
				ahead++
			}
		}
		rd.take = append(rd.take, take)
	}
	first := o.in.noteDue(m.clock.Now())
	urgent := o.in.unacked >= m.opts.ackEvery()
	m.origins.mu.Unlock()
	om := m.metrics.forPeer(origin)
	if lost > 0 {
		m.countLost(origin, lost)
	}
	if dups > 0 {
		om.duplicates.Add(float64(dups))
	}
	if ahead > 0 {
		om.early.Add(float64(ahead))
	}
	n := 0
	h := m.cfg.Handler
	for i := range rd.items {
		if rd.take[i] {
			it := &rd.items[i]
			h.Publish(origin, it.Msg, it.Direct, it.Groups)
			n++
		}
	}
	clear(rd.items)
	om.recvMessages.Add(float64(n))
	if first || urgent {
		m.pokePath(origin) // the acknowledgement: its writer sends it, or arms its timer
	}
	return nil
}

// acknowledged applies an acknowledgement from node id to its outbox.
func (m *Manager) acknowledged(id string, a ackFrame) {
	l := m.Link(id)
	if l == nil {
		return
	}
	l.mu.Lock()
	n := l.mu.out.ack(a.Inc, a.Gen, a.Seq)
	var via *Link
	if n > 0 {
		l.mu.progress = m.clock.Now()
		l.freeSpaceLocked()
		if l.mu.via != l && l.mu.out.pending.live > 0 {
			via = l.mu.via // the transit window opened
		}
	}
	live, bytes, unacked := l.mu.out.live(), l.mu.out.bytes(), l.mu.out.unacked()
	l.mu.Unlock()
	if via != nil {
		via.poke()
	}
	if n > 0 {
		l.lm.queueMessages.Set(float64(live))
		l.lm.queueBytes.Set(float64(bytes))
		l.lm.unacked.Set(float64(unacked))
	}
}

// receiveFrom handles a publish batch, an acknowledgement or a retained
// batch from origin, which came directly or through a transit node.
func (m *Manager) receiveFrom(origin string, typ byte, body []byte, rd *batchReader) error {
	switch typ {
	case framePublish:
		return rd.receive(m, origin, body)
	case frameAck:
		a, err := decodeAck(body)
		if err != nil {
			return err
		}
		m.acknowledged(origin, a)
		return nil
	case frameRetained:
		return m.receiveRetained(origin, body)
	}
	return fmt.Errorf("%w: %s frame from %s", ErrCorrupt, frameName(typ), origin)
}

// receiveRetained hands a retained batch from origin to the handler.
func (m *Manager) receiveRetained(origin string, body []byte) error {
	n := 0
	err := decodeRetainedBatch(body, func(msg []byte) error {
		m.cfg.Handler.Retained(origin, msg)
		n++
		return nil
	})
	m.metrics.forPeer(origin).recvMessages.Add(float64(n))
	return err
}

// receiveTransit handles a transit frame read from link l: one addressed
// to this node is handled as if its origin had sent it directly; one for
// another node is passed on to it over the direct link, if that is
// connected, and only on its first hop (from its origin): a frame that
// already went through a transit node is never passed on again, so no
// frame loops and none takes more than one extra hop.
func (m *Manager) receiveTransit(l *Link, body []byte, rd *batchReader) error {
	th, inner, err := decodeTransit(body)
	if err != nil {
		return err
	}
	self := m.cfg.NodeID
	switch {
	case th.To == self:
		if th.From == self {
			return fmt.Errorf("%w: transit frame from this node to itself", ErrCorrupt)
		}
		return m.receiveFrom(th.From, th.Type, inner, rd)
	case th.From != l.id:
		m.metrics.forPeer(th.To).transitDropped[TransitLoop].Inc()
		return nil
	}
	dst := m.Link(th.To)
	if dst == nil {
		m.metrics.forPeer(th.To).transitDropped[TransitNoLink].Inc()
		return nil
	}
	f, at := beginFrame(make([]byte, 0, frameHeaderLen+len(body)), frameTransit)
	f = append(f, body...)
	dst.enqueueTransit(endFrame(f, at))
	return nil
}

// countLost counts messages of origin lost with a restart of it.
func (m *Manager) countLost(origin string, n uint64) {
	m.metrics.lost.WithLabelValues(origin, LostOriginRestarted).Add(float64(n))
	m.log.Warn("peer: a node restarted with forwarded messages this node had not received", "peer", origin, "messages", n)
}
