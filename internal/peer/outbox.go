package peer

// outbox is the sending half of this node's acknowledged stream to one
// peer: every forwarded message for that peer, whichever path carries it
// (the direct link, or a transit node when the direct link is cut).
//
// QoS 1/2 messages get consecutive sequence numbers within the outbox's
// epoch (this process's incarnation and the outbox's generation: a new
// outbox, after the peer was removed and added again, starts a new epoch).
// They stay in the outbox after they are sent, until the peer acknowledges
// them (cumulatively: "everything up to s"); a new path, a new connection
// or a resend timeout sends the unacknowledged ones again, oldest first
// (rewind). QoS 0 messages have no number and leave the outbox when sent.
//
// The bound covers both the messages waiting to be sent and those sent and
// not yet acknowledged (QueueMessages, QueueBytes); the link applies the
// overflow policy (Link.Publish). It is not safe for concurrent use: the
// link's mutex guards it.
type outbox struct {
	inc, gen uint64 // the epoch
	next     uint64 // the next sequence number (the first is 1)
	next0    uint64 // the next QoS 0 number (the first is 1)
	acked    uint64 // every sequence number up to acked is acknowledged
	top      uint64 // the highest sequence number sent
	pending  dataQueue
	sent     []*Publish // sent, unacknowledged, in sequence order (sent[sentHead:])
	sentHead int
	sentSize int // bytes of sent[sentHead:]
}

func newOutbox(inc, gen uint64) outbox { return outbox{inc: inc, gen: gen, next: 1, next0: 1} }

// live and bytes are what count against the bound.
func (o *outbox) live() int  { return o.pending.live + len(o.sent) - o.sentHead }
func (o *outbox) bytes() int { return o.pending.bytes + o.sentSize }

// unacked returns how many messages were sent and await acknowledgement.
func (o *outbox) unacked() int { return len(o.sent) - o.sentHead }

// full reports whether one more message of size bytes would pass a bound;
// an empty outbox always takes one message, however large.
func (o *outbox) full(maxItems, maxBytes, size int) bool {
	n := o.live()
	return n > 0 && (n >= maxItems || o.bytes()+size > maxBytes)
}

// push numbers p and queues it.
func (o *outbox) push(p *Publish) {
	if p.acked() {
		p.seq = o.next
		o.next++
	} else {
		p.seq = o.next0
		o.next0++
	}
	o.pending.push(p)
}

// dropOldestQoS0 removes the oldest QoS 0 message waiting to be sent and
// reports whether there was one.
func (o *outbox) dropOldestQoS0() bool { return o.pending.dropOldestQoS0() }

// base is the lowest sequence number the outbox may still send: the
// receiver may skip what is below it (it was acknowledged, perhaps by an
// earlier incarnation of the receiver).
func (o *outbox) base() uint64 { return o.acked + 1 }

// take moves up to about maxBytes of waiting messages (at least one) into
// out, oldest first; the numbered ones are kept as sent until
// acknowledged.
func (o *outbox) take(out []*Publish, maxBytes int) []*Publish {
	start := len(out)
	out = o.pending.pop(out, maxBytes)
	for _, p := range out[start:] {
		if p.acked() {
			o.sent = append(o.sent, p)
			o.sentSize += p.size()
			o.top = max(o.top, p.seq)
		}
	}
	return out
}

// ack records that the peer has delivered everything up to seq of epoch
// (inc, gen) and releases those messages; it returns how many it released.
// An acknowledgement of another epoch, or of more than was sent (only a
// confused peer sends one), releases nothing.
func (o *outbox) ack(inc, gen, seq uint64) int {
	if inc != o.inc || gen != o.gen || seq <= o.acked || seq > o.top {
		return 0
	}
	n := 0
	for o.sentHead < len(o.sent) && o.sent[o.sentHead].seq <= seq {
		o.sentSize -= o.sent[o.sentHead].size()
		o.sent[o.sentHead] = nil
		o.sentHead++
		n++
	}
	// After a rewind the acknowledged messages wait at the front of
	// pending (numbered, never behind a QoS 0 one: anything sent before
	// was numbered, and what was never sent is numbered above seq).
	for o.pending.live > 0 {
		p := o.pending.front()
		if p == nil || !p.acked() || p.seq > seq {
			break
		}
		o.pending.popFront()
		n++
	}
	if o.sentHead == len(o.sent) {
		clear(o.sent)
		o.sent, o.sentHead = o.sent[:0], 0
	} else if o.sentHead > 64 && o.sentHead >= len(o.sent)/2 {
		k := copy(o.sent, o.sent[o.sentHead:])
		clear(o.sent[k:])
		o.sent, o.sentHead = o.sent[:k], 0
	}
	o.acked = seq
	return n
}

// rewind puts every sent, unacknowledged message back in front of the
// waiting ones, to be sent again on a new path, and returns how many.
func (o *outbox) rewind() int {
	n := len(o.sent) - o.sentHead
	o.pending.prepend(o.sent[o.sentHead:])
	clear(o.sent)
	o.sent, o.sentHead, o.sentSize = o.sent[:0], 0, 0
	return n
}

// clear drops everything and returns how many messages were held.
func (o *outbox) clear() int {
	n := o.pending.clear() + len(o.sent) - o.sentHead
	clear(o.sent)
	o.sent, o.sentHead, o.sentSize = o.sent[:0], 0, 0
	return n
}
