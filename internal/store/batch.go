package store

import (
	"encoding/binary"
	"fmt"

	"github.com/sextantmq/sextant/internal/message"
)

// Batch accumulates operations that commit atomically, in the order they were
// added (a put followed by a delete of the same key leaves it deleted). Each
// method encodes its record at once, so the caller may change or reuse the
// record afterwards. The zero value is an empty batch.
//
// A Batch is not safe for concurrent use. An operation on an invalid record
// (see the methods) is not added; it makes the batch invalid, and Commit
// rejects an invalid batch with the first such error (wrapping ErrInvalid).
type Batch struct {
	ops []op
	buf []byte // every op's name, key and value, back to back
	err error
}

type opKind uint8

const (
	opPutSession opKind = iota + 1
	opDeleteSession
	opPutMessage
	opDeleteMessage
	opPutInbound
	opDeleteInbound
	opPutRetained
	opDeleteRetained
	opDeleteRetainedTombstone
	opPutCursor
)

// span is a range of Batch.buf.
type span struct{ off, end int }

type op struct {
	kind opKind
	name span // client id, or topic for retained ops
	key  span // seq or packet id key for message and inbound ops
	val  span // encoded record for puts
}

// Len returns the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Err returns the error that made the batch invalid, or nil.
func (b *Batch) Err() error { return b.err }

// Reset empties the batch, keeping its memory for reuse.
func (b *Batch) Reset() {
	b.ops, b.buf, b.err = b.ops[:0], b.buf[:0], nil
}

func (b *Batch) bytes(s span) []byte { return b.buf[s.off:s.end:s.end] }

func (b *Batch) appendString(s string) span {
	off := len(b.buf)
	b.buf = append(b.buf, s...)
	return span{off, len(b.buf)}
}

func (b *Batch) appendKey(n uint64, size int) span {
	off := len(b.buf)
	if size == 2 {
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(n))
	} else {
		b.buf = binary.BigEndian.AppendUint64(b.buf, n)
	}
	return span{off, len(b.buf)}
}

// ok records err as the batch's error if it is the first, and reports whether
// the batch is still valid.
func (b *Batch) ok(err error) bool {
	if b.err == nil {
		b.err = err
	}
	return b.err == nil
}

// PutSession stores r, replacing any session with the same client id and
// the cursors recorded for it by PutCursor (r.Cursors are the session's
// now). It does not touch the session's messages or inbound packet ids. r must have a
// client id of 1 to 32768 bytes, protocol version 3, 4 or 5, valid
// subscriptions, and no will delay without a will.
func (b *Batch) PutSession(r *SessionRecord) {
	if !b.ok(validateSession(r)) {
		return
	}
	o := op{kind: opPutSession, name: b.appendString(r.ClientID)}
	off := len(b.buf)
	b.buf = appendSession(b.buf, r)
	o.val = span{off, len(b.buf)}
	b.ops = append(b.ops, o)
}

// DeleteSession deletes the session of clientID with all its queued messages,
// inbound packet ids and cursors.
func (b *Batch) DeleteSession(clientID string) {
	if !b.ok(validateKey("client id", clientID)) {
		return
	}
	b.ops = append(b.ops, op{kind: opDeleteSession, name: b.appendString(clientID)})
}

// PutMessage stores q under (clientID, q.Seq), replacing any message with the
// same Seq. q must have Seq > 0 and a consistent state: PacketID is 0 exactly
// while Queued, a sent message has QoS > 0, ReleaseSent needs QoS 2, and only
// a ReleaseSent message may have a nil Msg. Subscription ids are 1..268435455.
func (b *Batch) PutMessage(clientID string, q *QueuedMessage) {
	if !b.ok(validateQueued(clientID, q)) {
		return
	}
	o := op{kind: opPutMessage, name: b.appendString(clientID), key: b.appendKey(q.Seq, 8)}
	off := len(b.buf)
	b.buf = appendQueued(b.buf, q)
	o.val = span{off, len(b.buf)}
	b.ops = append(b.ops, o)
}

// DeleteMessage deletes the message (clientID, seq) if it exists.
func (b *Batch) DeleteMessage(clientID string, seq uint64) {
	if !b.ok(validateKey("client id", clientID)) {
		return
	}
	b.ops = append(b.ops, op{kind: opDeleteMessage, name: b.appendString(clientID), key: b.appendKey(seq, 8)})
}

// PutInbound records that clientID's QoS 2 publish with packetID (not 0)
// awaits PUBREL.
func (b *Batch) PutInbound(clientID string, packetID uint16) {
	if packetID == 0 {
		b.ok(fmt.Errorf("%w: inbound packet id 0 for %q", ErrInvalid, clientID))
		return
	}
	if !b.ok(validateKey("client id", clientID)) {
		return
	}
	b.ops = append(b.ops, op{kind: opPutInbound, name: b.appendString(clientID), key: b.appendKey(uint64(packetID), 2)})
}

// DeleteInbound forgets clientID's inbound packetID if it is recorded.
func (b *Batch) DeleteInbound(clientID string, packetID uint16) {
	if !b.ok(validateKey("client id", clientID)) {
		return
	}
	b.ops = append(b.ops, op{kind: opDeleteInbound, name: b.appendString(clientID), key: b.appendKey(uint64(packetID), 2)})
}

// PutCursor records clientID's cursor on placement group: the position
// seq (> 0) of the last record of the group's log the session took. It
// keeps a higher position already recorded since the session's record was
// last put (PutSession replaces the session's cursors by its record's), so
// that batches committed out of the order their deliveries were taken in
// cannot move it back. Load returns it in the session's record. Group is 1
// to 32768 bytes.
func (b *Batch) PutCursor(clientID, group string, seq uint64) {
	if seq == 0 {
		b.ok(fmt.Errorf("%w: cursor at 0 for %q", ErrInvalid, clientID))
		return
	}
	if !b.ok(validateKey("client id", clientID)) || !b.ok(validateKey("group", group)) {
		return
	}
	o := op{kind: opPutCursor, name: b.appendString(clientID), key: b.appendString(group)}
	o.val = b.appendKey(seq, 8)
	b.ops = append(b.ops, o)
}

// PutRetained stores m as the retained message of m.Topic (1 to 32768 bytes),
// replacing the previous one.
func (b *Batch) PutRetained(m *message.Message) {
	if !b.ok(validateKey("retained topic", m.Topic)) {
		return
	}
	o := op{kind: opPutRetained, name: b.appendString(m.Topic)}
	off := len(b.buf)
	b.buf = message.Append(b.buf, m)
	o.val = span{off, len(b.buf)}
	b.ops = append(b.ops, o)
}

// DeleteRetainedTombstone deletes topic's retained record only if it is the
// tombstone of a deletion stamped stamp (an empty-payload record, which a
// cluster keeps so that an older copy arriving late cannot bring the
// message back). The check runs in the commit's transaction, so a retained
// message stored since, in whatever order the batches commit, stays.
func (b *Batch) DeleteRetainedTombstone(topic string, stamp uint64) {
	if !b.ok(validateKey("retained topic", topic)) {
		return
	}
	b.ops = append(b.ops, op{kind: opDeleteRetainedTombstone, name: b.appendString(topic), key: b.appendKey(stamp, 8)})
}

// DeleteRetained deletes the retained message of topic if there is one.
func (b *Batch) DeleteRetained(topic string) {
	if !b.ok(validateKey("retained topic", topic)) {
		return
	}
	b.ops = append(b.ops, op{kind: opDeleteRetained, name: b.appendString(topic)})
}
