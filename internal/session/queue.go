package session

import (
	"sync"

	"github.com/sextantmq/sextant/internal/message"
)

// Delivery is one message on its way to this session's client.
type Delivery struct {
	Msg    *message.Message
	QoS    byte     // delivery QoS: min(published, granted)
	Retain bool     // retain flag to send
	IDs    []uint32 // subscription identifiers (owned by the delivery)
	Shared string   // "$share/group/filter" when delivered through a shared subscription
	// Group and Seq name a record of a placement group's log (a sequenced
	// topic's message): the session delivers each position at most once
	// and in order, through its cursor on the group (cursor.go). Replay
	// marks a delivery by the session's replay of the group, which its
	// cursor takes while live deliveries of the group wait.
	Group  string
	Seq    uint64
	Replay bool

	seq      uint64  // store sequence when persisted (persistent sessions, QoS>0), else 0
	ticket   *Ticket // the publish batch that persisted it, until acknowledged
	pid      uint16  // packet id once sent (QoS>0)
	state    byte    // see state* below
	sentAt   int64   // when the PUBLISH was last sent (unix nanoseconds), for RTT samples
	acked    bool    // acknowledged; waiting to be compacted off the in-flight head
	sentOnce bool
	// unsent: taken into the outbound window by Deliver, its packet id
	// written with its stored copy (takeHeldLocked), not yet sent.
	unsent bool
	// hold: the delivery is not sent before the store has made durable
	// what records it (see held deliveries in writer.go).
	hold bool
}

const (
	stateQueued  byte = 0 // not yet sent
	stateWaitAck byte = 1 // PUBLISH sent, waiting for PUBACK (QoS 1) or PUBREC (QoS 2)
	stateWaitRel byte = 2 // PUBREL sent, waiting for PUBCOMP
)

// ring is a FIFO of deliveries that grows by doubling; the caller bounds its
// length. Buffers above smallRing entries come from, and go back to, a
// per-size pool when the ring empties, so a burst does not leave an idle
// session holding a large buffer and steady traffic does not reallocate.
type ring struct {
	buf  []Delivery
	head int
	n    int
}

const (
	smallRing    = 64
	ringClasses  = 11 // pooled capacities smallRing<<1 .. smallRing<<ringClasses
	maxPooledCap = smallRing << ringClasses
)

var ringPools [ringClasses + 1]sync.Pool

func ringClass(c int) int {
	k := 0
	for c > smallRing {
		c >>= 1
		k++
	}
	return k
}

func (r *ring) Len() int { return r.n }

func (r *ring) grow() {
	c := len(r.buf) * 2
	if c == 0 {
		c = 4
	}
	var nb []Delivery
	if c > smallRing && c <= maxPooledCap {
		if p, ok := ringPools[ringClass(c)].Get().(*[]Delivery); ok {
			nb = *p
		}
	}
	if nb == nil {
		nb = make([]Delivery, c)
	}
	for i := 0; i < r.n; i++ {
		j := (r.head + i) % len(r.buf)
		nb[i] = r.buf[j]
		r.buf[j] = Delivery{}
	}
	r.release()
	r.buf, r.head = nb, 0
}

// release returns a large, already cleared buffer to its pool.
func (r *ring) release() {
	if c := len(r.buf); c > smallRing && c <= maxPooledCap {
		b := r.buf
		ringPools[ringClass(c)].Put(&b)
	}
	r.buf = nil
}

func (r *ring) PushBack(d Delivery) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = d
	r.n++
}

// At returns a pointer to the i-th element from the front.
func (r *ring) At(i int) *Delivery { return &r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) PopFront() Delivery {
	d := r.buf[r.head]
	r.buf[r.head] = Delivery{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
		r.head = 0
		if len(r.buf) > smallRing {
			r.release() // give back the memory a burst took
		}
	}
	return d
}

// RemoveAt removes the i-th element, keeping order.
func (r *ring) RemoveAt(i int) Delivery {
	d := *r.At(i)
	for j := i; j < r.n-1; j++ {
		*r.At(j) = *r.At(j + 1)
	}
	*r.At(r.n - 1) = Delivery{}
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	return d
}

// inflight is the outbound window: deliveries that were given packet ids, in
// the order the ids were allocated. Ids are allocated sequentially (skipping
// 0), so the entry for id p normally sits at offset distance(head.pid, p),
// and the window cannot wrap onto an id still in use because its length
// (acknowledged holes included) is bounded by the window size. Entries
// restored from the store may have gaps between ids; then the window is
// "sparse" and lookups fall back to a scan until it empties.
type inflight struct {
	q       ring
	lastPID uint16
	unacked int
	sparse  bool
}

func nextPID(p uint16) uint16 {
	p++
	if p == 0 {
		p = 1
	}
	return p
}

// pidDistance is how many allocations separate a from b.
func pidDistance(a, b uint16) int {
	if b >= a {
		return int(b - a)
	}
	return int(b) + 65535 - int(a)
}

// Len counts entries including acknowledged ones not yet compacted.
func (f *inflight) Len() int { return f.q.Len() }

// Add allocates the next free packet id for d and appends it.
func (f *inflight) Add(d Delivery) *Delivery {
	p := nextPID(f.lastPID)
	for f.sparse && f.find(p) != nil {
		p = nextPID(p)
	}
	if f.q.Len() > 0 && p != nextPID(f.q.At(f.q.Len()-1).pid) {
		f.sparse = true
	}
	f.lastPID = p
	d.pid = p
	f.q.PushBack(d)
	f.unacked++
	return f.q.At(f.q.Len() - 1)
}

// Restore appends a delivery that already has a packet id (loaded from the
// store or kept across a reconnect), in allocation order.
func (f *inflight) Restore(d Delivery) {
	if f.q.Len() > 0 && d.pid != nextPID(f.q.At(f.q.Len()-1).pid) {
		f.sparse = true
	}
	f.lastPID = d.pid
	f.q.PushBack(d)
	f.unacked++
}

// Find returns the unacknowledged entry with packet id p.
func (f *inflight) Find(p uint16) *Delivery {
	if p == 0 {
		return nil
	}
	return f.find(p)
}

func (f *inflight) find(p uint16) *Delivery {
	n := f.q.Len()
	if n == 0 {
		return nil
	}
	if off := pidDistance(f.q.At(0).pid, p); off < n {
		if d := f.q.At(off); d.pid == p {
			if d.acked {
				return nil
			}
			return d
		}
	}
	if !f.sparse {
		return nil
	}
	for i := 0; i < n; i++ {
		if d := f.q.At(i); d.pid == p && !d.acked {
			return d
		}
	}
	return nil
}

// Complete marks p's entry done and compacts acknowledged entries off the
// head. It returns the completed delivery.
func (f *inflight) Complete(p uint16) (Delivery, bool) {
	d := f.Find(p)
	if d == nil {
		return Delivery{}, false
	}
	done := *d
	d.acked = true
	d.Msg = nil
	d.IDs = nil
	d.ticket = nil
	f.unacked--
	for f.q.Len() > 0 && f.q.At(0).acked {
		f.q.PopFront()
	}
	if f.q.Len() == 0 {
		f.sparse = false
	}
	return done, true
}

// Each calls fn for every unacknowledged entry in order.
func (f *inflight) Each(fn func(d *Delivery)) {
	for i := 0; i < f.q.Len(); i++ {
		if d := f.q.At(i); !d.acked {
			fn(d)
		}
	}
}

// Drain removes and returns every unacknowledged entry, in order.
func (f *inflight) Drain() []Delivery {
	var out []Delivery
	for f.q.Len() > 0 {
		d := f.q.PopFront()
		if !d.acked {
			out = append(out, d)
		}
	}
	f.unacked = 0
	f.sparse = false
	return out
}
