package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/wire"
)

// SubscriptionRecord is one stored subscription of a session.
type SubscriptionRecord struct {
	Filter            string // as subscribed, including any $share/<group>/ prefix
	QoS               byte   // maximum QoS granted
	NoLocal           bool
	RetainAsPublished bool
	RetainHandling    byte   // 0, 1 or 2
	ID                uint32 // subscription identifier, 0 if none
}

// NeverExpires is the session expiry interval of a session that never expires.
const NeverExpires = math.MaxUint32

// SessionRecord is the durable part of one MQTT session.
type SessionRecord struct {
	ClientID       string
	Version        byte   // MQTT protocol level: 3, 4 (3.1.1) or 5
	ExpiryInterval uint32 // seconds; NeverExpires = never
	DisconnectedAt time.Time
	Subscriptions  []SubscriptionRecord
	// Will is the pending will of a disconnected session (nil if none), to be
	// published WillDelay seconds after DisconnectedAt.
	Will      *message.Message
	WillDelay uint32
	// Cursors are the session's positions in the logs of placement groups
	// it receives sequenced topics from: its backlog there (the records
	// after them), sorted by group. LoadSessions returns them with those
	// put by Batch.PutCursor since the record was stored.
	Cursors []CursorRecord
	// SubscribedAt is when the session's earliest subscription was made
	// (zero: unknown, records of earlier versions): after a restart the
	// node's feeds start no later than this, so a group created after the
	// session subscribed, on which its record has no cursor, reaches it
	// from its first record.
	SubscribedAt time.Time
}

// CursorRecord is a session's position in a placement group's log: the
// last record it took.
type CursorRecord struct {
	Group string
	Seq   uint64
}

// Delivery states of a QueuedMessage.
const (
	Queued          byte = iota // not sent yet; PacketID is 0
	SentAwaitingAck             // PUBLISH sent, waiting for PUBACK (QoS 1) or PUBREC (QoS 2)
	ReleaseSent                 // PUBREL sent, waiting for PUBCOMP (QoS 2); Msg may be nil
)

// QueuedMessage is one outbound message of a session, ordered by Seq.
type QueuedMessage struct {
	Seq        uint64 // > 0, unique and increasing per session
	Msg        *message.Message
	QoS        byte // delivery QoS (the minimum of publish and subscription QoS)
	RetainFlag bool // the RETAIN flag to send
	SubIDs     []uint32
	PacketID   uint16 // 0 until sent
	State      byte   // Queued, SentAwaitingAck or ReleaseSent
}

// Limits the records must respect (bbolt's key limit; MQTT's identifier range).
const (
	maxKeyLen = 32768     // bbolt MaxKeySize: client ids and retained topics
	maxSubID  = 268435455 // largest MQTT 5 subscription identifier
)

// recordVersion is the first byte of every session and queued-message record.
const recordVersion = 1

// Session record layout: version, protocol version, flags, uvarint expiry
// interval, [varint DisconnectedAt unix nanos], uvarint subscription count,
// each subscription (uvarint length + filter, options byte, uvarint id),
// [uvarint cursor count, each cursor (uvarint length + group, uvarint
// seq)], [varint SubscribedAt unix nanos], [uvarint will delay, the
// will's message.Append encoding to the end]. Records without cursors or
// SubscribedAt are those of earlier versions.
const (
	sessFlagDisconnected = 1 << iota
	sessFlagWill
	sessFlagCursors
	sessFlagSubscribedAt
)

// Subscription options byte: qos in bits 0-1, no local bit 2, retain as
// published bit 3, retain handling in bits 4-5.
const (
	subNoLocal = 1 << 2
	subRAP     = 1 << 3
)

func validateSession(r *SessionRecord) error {
	if err := validateKey("client id", r.ClientID); err != nil {
		return err
	}
	if r.Version < 3 || r.Version > 5 {
		return fmt.Errorf("%w: session %q: protocol version %d", ErrInvalid, r.ClientID, r.Version)
	}
	if r.Will == nil && r.WillDelay != 0 {
		return fmt.Errorf("%w: session %q: will delay without a will", ErrInvalid, r.ClientID)
	}
	for i := range r.Subscriptions {
		s := &r.Subscriptions[i]
		if s.Filter == "" || s.QoS > 2 || s.RetainHandling > 2 || s.ID > maxSubID {
			return fmt.Errorf("%w: session %q: subscription %q", ErrInvalid, r.ClientID, s.Filter)
		}
	}
	return nil
}

func validateKey(what, k string) error {
	if k == "" || len(k) > maxKeyLen {
		return fmt.Errorf("%w: %s of %d bytes", ErrInvalid, what, len(k))
	}
	return nil
}

// appendSession appends r's record (not its client id, which is the key).
func appendSession(dst []byte, r *SessionRecord) []byte {
	var flags byte
	if !r.DisconnectedAt.IsZero() {
		flags |= sessFlagDisconnected
	}
	if r.Will != nil {
		flags |= sessFlagWill
	}
	if len(r.Cursors) > 0 {
		flags |= sessFlagCursors
	}
	if !r.SubscribedAt.IsZero() {
		flags |= sessFlagSubscribedAt
	}
	dst = append(dst, recordVersion, r.Version, flags)
	dst = binary.AppendUvarint(dst, uint64(r.ExpiryInterval))
	if flags&sessFlagDisconnected != 0 {
		dst = binary.AppendVarint(dst, r.DisconnectedAt.UnixNano())
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Subscriptions)))
	for _, s := range r.Subscriptions {
		dst = wire.AppendString(dst, s.Filter)
		opt := s.QoS | s.RetainHandling<<4
		if s.NoLocal {
			opt |= subNoLocal
		}
		if s.RetainAsPublished {
			opt |= subRAP
		}
		dst = append(dst, opt)
		dst = binary.AppendUvarint(dst, uint64(s.ID))
	}
	if flags&sessFlagCursors != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(r.Cursors)))
		for _, c := range r.Cursors {
			dst = wire.AppendString(dst, c.Group)
			dst = binary.AppendUvarint(dst, c.Seq)
		}
	}
	if flags&sessFlagSubscribedAt != 0 {
		dst = binary.AppendVarint(dst, r.SubscribedAt.UnixNano())
	}
	if r.Will != nil {
		dst = binary.AppendUvarint(dst, uint64(r.WillDelay))
		dst = message.Append(dst, r.Will)
	}
	return dst
}

// decodeSession decodes the record stored under key clientID. The result does
// not alias b.
func decodeSession(clientID, b []byte) (*SessionRecord, error) {
	if len(clientID) == 0 || len(clientID) > maxKeyLen {
		return nil, fmt.Errorf("%w: session key of %d bytes", ErrCorrupt, len(clientID))
	}
	if len(b) < 3 || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: session %q: bad header", ErrCorrupt, clientID)
	}
	r := &SessionRecord{ClientID: string(clientID), Version: b[1]}
	flags := b[2]
	if r.Version < 3 || r.Version > 5 || flags&^(sessFlagDisconnected|sessFlagWill|sessFlagCursors|sessFlagSubscribedAt) != 0 {
		return nil, fmt.Errorf("%w: session %q: bad header", ErrCorrupt, clientID)
	}
	d := wire.NewDecoder(b[3:])
	r.ExpiryInterval = d.Uint32()
	if flags&sessFlagDisconnected != 0 {
		r.DisconnectedAt = time.Unix(0, d.Varint())
	}
	// Each subscription takes at least 4 bytes: length, filter byte, options, id.
	n := d.Count(4)
	if n > 0 {
		r.Subscriptions = make([]SubscriptionRecord, 0, n)
	}
	for i := 0; i < n && !d.Failed(); i++ {
		f := d.Bytes()
		opt := d.Byte()
		id := d.Uvarint()
		s := SubscriptionRecord{
			Filter: string(f), QoS: opt & 3, NoLocal: opt&subNoLocal != 0,
			RetainAsPublished: opt&subRAP != 0, RetainHandling: opt >> 4, ID: uint32(id),
		}
		if len(f) == 0 || s.QoS > 2 || s.RetainHandling > 2 || id > maxSubID {
			d.Fail()
		}
		r.Subscriptions = append(r.Subscriptions, s)
	}
	if flags&sessFlagCursors != 0 {
		// Each cursor takes at least 3 bytes: length, a group byte, seq.
		nc := d.Count(3)
		if nc == 0 {
			d.Fail()
		}
		for i := 0; i < nc && !d.Failed(); i++ {
			c := CursorRecord{Group: d.Str(), Seq: d.Uvarint()}
			if c.Group == "" {
				d.Fail()
			}
			r.Cursors = append(r.Cursors, c)
		}
	}
	if flags&sessFlagSubscribedAt != 0 {
		r.SubscribedAt = time.Unix(0, d.Varint())
	}
	if flags&sessFlagWill != 0 {
		r.WillDelay = d.Uint32()
		if d.Failed() {
			return nil, fmt.Errorf("%w: session %q: truncated", ErrCorrupt, clientID)
		}
		m, err := message.Decode(d.Rest())
		if err != nil {
			return nil, fmt.Errorf("%w: session %q: will: %w", ErrCorrupt, clientID, err)
		}
		r.Will = m
	}
	if err := finishRecord(&d); err != nil {
		return nil, fmt.Errorf("%w: session %q", err, clientID)
	}
	return r, nil
}

// Queued message record layout: version, qos, state, flags, packet id (2
// bytes big-endian), uvarint count of subscription ids, each id as uvarint,
// [the message's message.Append encoding to the end].
const (
	qFlagRetain = 1 << iota
	qFlagMsg
)

func validateQueued(clientID string, q *QueuedMessage) error {
	if err := validateKey("client id", clientID); err != nil {
		return err
	}
	bad := q.Seq == 0 || q.QoS > 2 || q.State > ReleaseSent ||
		(q.State == Queued) != (q.PacketID == 0) ||
		(q.State != Queued && q.QoS == 0) ||
		(q.State == ReleaseSent && q.QoS != 2) ||
		(q.Msg == nil && q.State != ReleaseSent)
	for _, id := range q.SubIDs {
		bad = bad || id == 0 || id > maxSubID
	}
	if bad {
		return fmt.Errorf("%w: message %d of %q: qos %d state %d packet id %d", ErrInvalid, q.Seq, clientID, q.QoS, q.State, q.PacketID)
	}
	return nil
}

func appendQueued(dst []byte, q *QueuedMessage) []byte {
	var flags byte
	if q.RetainFlag {
		flags |= qFlagRetain
	}
	if q.Msg != nil {
		flags |= qFlagMsg
	}
	dst = append(dst, recordVersion, q.QoS, q.State, flags)
	dst = binary.BigEndian.AppendUint16(dst, q.PacketID)
	dst = binary.AppendUvarint(dst, uint64(len(q.SubIDs)))
	for _, id := range q.SubIDs {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	if q.Msg != nil {
		dst = message.Append(dst, q.Msg)
	}
	return dst
}

// decodeQueued decodes the record stored under key (8-byte big-endian seq).
// The result does not alias b.
func decodeQueued(key, b []byte) (*QueuedMessage, error) {
	if len(key) != 8 || binary.BigEndian.Uint64(key) == 0 {
		return nil, fmt.Errorf("%w: message key %x", ErrCorrupt, key)
	}
	seq := binary.BigEndian.Uint64(key)
	if len(b) < 6 || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: message %d: bad header", ErrCorrupt, seq)
	}
	q := &QueuedMessage{Seq: seq, QoS: b[1], State: b[2], RetainFlag: b[3]&qFlagRetain != 0,
		PacketID: binary.BigEndian.Uint16(b[4:6])}
	flags := b[3]
	if flags&^(qFlagRetain|qFlagMsg) != 0 || q.QoS > 2 || q.State > ReleaseSent ||
		(q.State == Queued) != (q.PacketID == 0) ||
		(q.State != Queued && q.QoS == 0) ||
		(q.State == ReleaseSent && q.QoS != 2) ||
		(flags&qFlagMsg == 0 && q.State != ReleaseSent) {
		return nil, fmt.Errorf("%w: message %d: bad header", ErrCorrupt, seq)
	}
	d := wire.NewDecoder(b[6:])
	n := d.Count(1)
	if n > 0 {
		q.SubIDs = make([]uint32, 0, n)
	}
	for i := 0; i < n && !d.Failed(); i++ {
		id := d.Uvarint()
		if id == 0 || id > maxSubID {
			d.Fail()
		}
		q.SubIDs = append(q.SubIDs, uint32(id))
	}
	if flags&qFlagMsg != 0 {
		if d.Failed() {
			return nil, fmt.Errorf("%w: message %d: truncated", ErrCorrupt, seq)
		}
		m, err := message.Decode(d.Rest())
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrCorrupt, seq, err)
		}
		q.Msg = m
	}
	if err := finishRecord(&d); err != nil {
		return nil, fmt.Errorf("%w: message %d", err, seq)
	}
	return q, nil
}

// AppendSessionRecord appends r in the layout the store keeps it (without
// its client id, which is the record's key). A session moving between nodes
// travels in this layout too, so a session is encoded one way.
func AppendSessionRecord(dst []byte, r *SessionRecord) []byte { return appendSession(dst, r) }

// DecodeSessionRecord decodes AppendSessionRecord's output for clientID;
// the result does not alias b. Bad input is an error wrapping ErrCorrupt.
func DecodeSessionRecord(clientID string, b []byte) (*SessionRecord, error) {
	return decodeSession([]byte(clientID), b)
}

// AppendQueuedRecord appends q in the layout the store keeps it (without
// its sequence number, which is the record's key).
func AppendQueuedRecord(dst []byte, q *QueuedMessage) []byte { return appendQueued(dst, q) }

// DecodeQueuedRecord decodes AppendQueuedRecord's output for sequence
// number seq; the result does not alias b. Bad input is an error wrapping
// ErrCorrupt.
func DecodeQueuedRecord(seq uint64, b []byte) (*QueuedMessage, error) {
	return decodeQueued(binary.BigEndian.AppendUint64(nil, seq), b)
}

// decodeRetained decodes the retained message stored under key topic.
func decodeRetained(topic, b []byte) (*message.Message, error) {
	m, err := message.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%w: retained %q: %w", ErrCorrupt, topic, err)
	}
	if m.Topic != string(topic) || m.Topic == "" {
		return nil, fmt.Errorf("%w: retained under %q has topic %q", ErrCorrupt, topic, m.Topic)
	}
	return m, nil
}

// decodeInbound decodes an inbound packet id key.
func decodeInbound(key []byte) (uint16, error) {
	if len(key) != 2 || binary.BigEndian.Uint16(key) == 0 {
		return 0, fmt.Errorf("%w: inbound packet id key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint16(key), nil
}

// finishRecord wraps a decoder's failure as ErrCorrupt.
func finishRecord(d *wire.Decoder) error {
	if err := d.Finish(); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}
