package peer

// Publish is one forwarded message for one peer: the receiving node
// delivers Msg to its direct subscribers when Direct is set, and to one
// member of each shared group ("$share/group/filter") in Groups.
type Publish struct {
	Msg    []byte // message.Append encoding; shared between links, never modified
	QoS    byte   // the message's QoS: 1 and 2 are acknowledged (outbox.go), 0 is not
	Direct bool
	Groups []string

	// seq is the outbox's number for the message: in the acknowledged
	// sequence for QoS 1/2, in the QoS 0 sequence (which only keeps QoS 0
	// messages in order) for QoS 0.
	seq uint64
}

// acked reports whether the message is acknowledged by the receiver: QoS
// 1/2 ones are, QoS 0 ones are not.
func (p *Publish) acked() bool { return p.QoS > 0 }

// size is what an item counts against a queue's byte bound.
func (p *Publish) size() int {
	n := 32 + len(p.Msg)
	for _, g := range p.Groups {
		n += 16 + len(g)
	}
	return n
}

// dataQueue is a FIFO of forwarded publishes: an outbox's messages not yet
// sent on its current path. It is not safe for concurrent use: the link's
// mutex guards it. Dropping an item leaves a nil
// hole that pop skips; holes are compacted away so the backing slice stays
// within a small multiple of the live count.
type dataQueue struct {
	items []*Publish // items[head:] are queued; nil entries were dropped
	head  int
	live  int
	bytes int
	scan  int // items[head:scan] hold no live QoS 0 item
}

// push appends p.
func (q *dataQueue) push(p *Publish) {
	q.items = append(q.items, p)
	q.live++
	q.bytes += p.size()
}

// full reports whether adding an item of size bytes would pass a bound. An
// empty queue always takes one item, however large.
func (q *dataQueue) full(maxItems, maxBytes, size int) bool {
	if q.live == 0 {
		return false
	}
	return q.live >= maxItems || q.bytes+size > maxBytes
}

// dropOldestQoS0 removes the oldest QoS 0 item and reports whether there
// was one.
func (q *dataQueue) dropOldestQoS0() bool {
	if q.scan < q.head {
		q.scan = q.head
	}
	for ; q.scan < len(q.items); q.scan++ {
		p := q.items[q.scan]
		if p != nil && p.QoS == 0 {
			q.items[q.scan] = nil
			q.live--
			q.bytes -= p.size()
			q.scan++
			q.compact()
			return true
		}
	}
	return false
}

// pop moves queued items into out, oldest first, until about maxBytes of
// them (at least one) or the queue is empty.
func (q *dataQueue) pop(out []*Publish, maxBytes int) []*Publish {
	taken := 0
	for q.head < len(q.items) && (taken == 0 || taken < maxBytes) {
		p := q.items[q.head]
		q.items[q.head] = nil
		q.head++
		if p == nil {
			continue
		}
		s := p.size()
		if taken > 0 && taken+s > maxBytes {
			q.head--
			q.items[q.head] = p
			break
		}
		taken += s
		q.live--
		q.bytes -= s
		out = append(out, p)
	}
	q.compact()
	return out
}

// front returns the oldest queued item, or nil.
func (q *dataQueue) front() *Publish {
	for q.head < len(q.items) && q.items[q.head] == nil {
		q.head++
	}
	if q.head == len(q.items) {
		return nil
	}
	return q.items[q.head]
}

// popFront removes the oldest queued item (there must be one).
func (q *dataQueue) popFront() {
	p := q.front()
	q.items[q.head] = nil
	q.head++
	q.live--
	q.bytes -= p.size()
	q.compact()
}

// prepend puts ps (oldest first) in front of the queued items: an outbox
// sends its unacknowledged messages again. It costs a copy of the queue,
// which is fine for what triggers it (a new path or connection, a resend
// timeout).
func (q *dataQueue) prepend(ps []*Publish) {
	if len(ps) == 0 {
		return
	}
	items := make([]*Publish, 0, len(ps)+len(q.items)-q.head)
	items = append(items, ps...)
	items = append(items, q.items[q.head:]...)
	for _, p := range ps {
		q.live++
		q.bytes += p.size()
	}
	clear(q.items)
	q.items, q.head, q.scan = items, 0, 0
}

// clear drops everything and returns how many items were queued.
func (q *dataQueue) clear() int {
	n := q.live
	clear(q.items)
	*q = dataQueue{items: q.items[:0]}
	return n
}

// compact reclaims the consumed prefix and the holes once they dominate.
func (q *dataQueue) compact() {
	if q.live == 0 {
		clear(q.items)
		q.items, q.head, q.scan = q.items[:0], 0, 0
		return
	}
	if q.head > 64 && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		q.scan -= q.head
		q.head = 0
		if q.scan < 0 {
			q.scan = 0
		}
	}
	if span := len(q.items) - q.head; span > 64 && span > 2*q.live {
		j := 0
		for i := q.head; i < len(q.items); i++ {
			if q.items[i] != nil {
				q.items[j] = q.items[i]
				j++
			}
		}
		clear(q.items[j:])
		q.items, q.head, q.scan = q.items[:j], 0, 0
	}
}
