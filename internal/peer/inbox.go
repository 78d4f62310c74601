package peer

import "time"

// inbox is the receiving half of one origin node's acknowledged stream to
// this node: which epoch of the origin's outbox it follows, and the next
// sequence number it will deliver. Deduplication is by (origin, epoch,
// sequence): a message numbered below next is a duplicate (a resend, or a
// copy that took another path) and is skipped.
//
// Order is kept by go-back-N: only the message numbered next is delivered.
// One numbered above next (an earlier one is missing: it was lost with a
// path, or is still on a slower one) is skipped too, not held back; the
// origin sends it again after the missing ones, from its first
// unacknowledged message, whenever it changes path or reconnects, or after
// its resend timeout on a transit path. Skipping costs a resend only after
// a path change; holding would cost a buffer per origin and a bound on it.
//
// It is not safe for concurrent use: Manager.inboxes guards it.
type inbox struct {
	inc, gen uint64    // the epoch followed; zero before the first frame
	next     uint64    // the next sequence number to deliver; 0: none yet
	next0    uint64    // the lowest QoS 0 number still deliverable
	seen     uint64    // the highest sequence number seen in this epoch
	unacked  int       // numbered messages decided since the last acknowledgement
	due      time.Time // when the first of them was decided (zero: none)
}

// verdict is what to do with one numbered message.
type verdict int

const (
	deliver   verdict = iota
	duplicate         // numbered below next: already delivered
	early             // numbered above next: an earlier message is missing
)

// admit checks a frame's epoch and base (the lowest number the origin may
// still send). A frame of an older epoch is stale (ok false). A newer
// epoch restarts the stream; lost is how many messages of the old epoch
// this node saw numbered and never delivered when the origin's
// incarnation changed (a restart: what it held unacknowledged is gone).
// The base moves next forward over what the origin no longer holds.
func (in *inbox) admit(inc, gen, base uint64) (ok bool, lost uint64) {
	switch {
	case inc < in.inc || (inc == in.inc && gen < in.gen):
		return false, 0
	case inc > in.inc || gen > in.gen:
		if inc > in.inc {
			lost = in.restarted()
		}
		*in = inbox{inc: inc, gen: gen}
	}
	if base > in.next {
		in.next = base
		in.unacked++
	}
	return true, lost
}

// observe records the origin's incarnation as announced in a connection's
// handshake and returns how many messages were lost if it restarted.
func (in *inbox) observe(inc uint64) (lost uint64) {
	if inc <= in.inc {
		return 0
	}
	lost = in.restarted()
	*in = inbox{inc: inc}
	return lost
}

// restarted is what an origin's restart cost this inbox: messages seen
// numbered and never delivered.
func (in *inbox) restarted() uint64 {
	if in.next == 0 || in.seen < in.next {
		return 0
	}
	return in.seen - in.next + 1
}

// accept decides about the message numbered seq of an admitted frame.
func (in *inbox) accept(seq uint64) verdict {
	in.unacked++
	in.seen = max(in.seen, seq)
	switch {
	case seq < in.next:
		return duplicate
	case seq > in.next:
		return early
	}
	in.next++
	return deliver
}

// acceptQoS0 decides about the QoS 0 message numbered seq of an admitted
// frame: delivered unless a later one was (QoS 0 messages may be lost,
// never reordered).
func (in *inbox) acceptQoS0(seq uint64) verdict {
	if seq < in.next0 {
		return duplicate
	}
	in.next0 = seq + 1
	return deliver
}

// noteDue records when acknowledgements became due (now, if they just did)
// and reports whether they just did.
func (in *inbox) noteDue(now time.Time) bool {
	if in.unacked == 0 || !in.due.IsZero() {
		return false
	}
	in.due = now
	return true
}

// ack returns the cumulative acknowledgement due, if any, and clears it.
// An acknowledgement waits (delayed acknowledgement: fewer frames, and a
// ride on a frame going to the origin anyway) unless send is set, every
// messages wait, or it has been due for delay; when it waits, wake is when
// it stops waiting.
func (in *inbox) ack(now time.Time, send bool, every int, delay time.Duration) (a ackFrame, ok bool, wake time.Time) {
	if in.unacked == 0 || in.next <= 1 {
		return a, false, time.Time{}
	}
	if !send && in.unacked < every && now.Sub(in.due) < delay {
		return a, false, in.due.Add(delay)
	}
	in.unacked, in.due = 0, time.Time{}
	return ackFrame{Inc: in.inc, Gen: in.gen, Seq: in.next - 1}, true, time.Time{}
}
