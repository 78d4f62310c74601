package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/store"
)

// ErrCorrupt reports a request or answer from a peer that cannot be decoded.
var ErrCorrupt = errors.New("cluster: corrupt encoding")

// Request methods on peer links.
const (
	methodRegister   byte = 1 // directory owner: a client connected to a node; answer: previous holder
	methodAssert     byte = 2 // directory owner: a holder re-registers sessions; answer: those held elsewhere since
	methodUnregister byte = 3 // directory owner (notification): a session ended on a node
	methodHandOver   byte = 4 // holder: close the client's connection and send the session
	methodDrop       byte = 5 // holder (notification): a newer claim exists; drop a stale session
	methodPing       byte = 6 // any node: answer at once (round-trip probe)
)

// stateVersion is the first byte of an encoded session state.
const stateVersion = 1

// Flags of an encoded session state and its parts.
const (
	stateFlagDisconnected = 1 << iota
	stateFlagWill
)

const (
	subNoLocal = 1 << 0
	subRAP     = 1 << 1
)

const (
	queuedFlagMsg    = 1 << 0
	queuedFlagRetain = 1 << 1
)

// claim says that node holds clientID's session since stamp (the hybrid
// logical time of the CONNECT that put it there; 0 for a session loaded
// from a node's store, which any later claim beats).
type claim struct {
	ClientID string
	Node     string
	Stamp    uint64
}

// appendClaim encodes a register, unregister or drop request.
func appendClaim(dst []byte, c claim) []byte {
	dst = appendString(dst, c.ClientID)
	dst = appendString(dst, c.Node)
	return binary.AppendUvarint(dst, c.Stamp)
}

func decodeClaim(b []byte) (claim, error) {
	d := decoder{b: b}
	c := claim{ClientID: d.string(), Node: d.string(), Stamp: d.uvarint()}
	return c, d.finish("claim")
}

// appendAssert encodes a holder's re-registration of many sessions.
func appendAssert(dst []byte, node string, ids []string, stamps []uint64) []byte {
	dst = appendString(dst, node)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for i, id := range ids {
		dst = appendString(dst, id)
		dst = binary.AppendUvarint(dst, stamps[i])
	}
	return dst
}

func decodeAssert(b []byte) (node string, ids []string, stamps []uint64, err error) {
	d := decoder{b: b}
	node = d.string()
	n := d.count(2)
	for i := 0; i < n && !d.err; i++ {
		ids = append(ids, d.string())
		stamps = append(stamps, d.uvarint())
	}
	return node, ids, stamps, d.finish("assert")
}

func appendStringList(dst []byte, ss []string) []byte { return appendStrings(dst, ss) }

func decodeStringList(b []byte) ([]string, error) {
	d := decoder{b: b}
	ss := d.strings()
	return ss, d.finish("string list")
}

// appendHandOver encodes a hand-over request.
func appendHandOver(dst []byte, clientID string, cleanStart bool) []byte {
	dst = appendString(dst, clientID)
	if cleanStart {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func decodeHandOver(b []byte) (clientID string, cleanStart bool, err error) {
	d := decoder{b: b}
	clientID = d.string()
	f := d.byte()
	if f > 1 {
		d.fail()
	}
	return clientID, f == 1, d.finish("hand-over")
}

// appendState encodes a moving session: nothing for nil, else the version
// byte, the session record (as the store keeps it, will included if any),
// the queued and in-flight messages in order, and the inbound QoS 2 ids.
func appendState(dst []byte, st *broker.SessionState) []byte {
	if st == nil || st.Record == nil {
		return dst
	}
	r := st.Record
	dst = append(dst, stateVersion)
	var flags byte
	if !r.DisconnectedAt.IsZero() {
		flags |= stateFlagDisconnected
	}
	if r.Will != nil {
		flags |= stateFlagWill
	}
	dst = append(dst, flags, r.Version)
	dst = appendString(dst, r.ClientID)
	dst = binary.AppendUvarint(dst, uint64(r.ExpiryInterval))
	if flags&stateFlagDisconnected != 0 {
		dst = binary.AppendVarint(dst, r.DisconnectedAt.UnixNano())
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Subscriptions)))
	for _, s := range r.Subscriptions {
		dst = appendString(dst, s.Filter)
		var f byte
		if s.NoLocal {
			f |= subNoLocal
		}
		if s.RetainAsPublished {
			f |= subRAP
		}
		dst = append(dst, s.QoS, f, s.RetainHandling)
		dst = binary.AppendUvarint(dst, uint64(s.ID))
	}
	if flags&stateFlagWill != 0 {
		dst = binary.AppendUvarint(dst, uint64(r.WillDelay))
		dst = appendBytes(dst, message.Append(nil, r.Will))
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.Messages)))
	for _, q := range st.Messages {
		dst = binary.AppendUvarint(dst, q.Seq)
		var f byte
		if q.Msg != nil {
			f |= queuedFlagMsg
		}
		if q.RetainFlag {
			f |= queuedFlagRetain
		}
		dst = append(dst, f, q.QoS, q.State)
		dst = binary.AppendUvarint(dst, uint64(q.PacketID))
		dst = binary.AppendUvarint(dst, uint64(len(q.SubIDs)))
		for _, id := range q.SubIDs {
			dst = binary.AppendUvarint(dst, uint64(id))
		}
		if q.Msg != nil {
			dst = appendBytes(dst, message.Append(nil, q.Msg))
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.Inbound)))
	for _, id := range st.Inbound {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	return dst
}

// decodeState decodes appendState's output; empty input is no session.
func decodeState(b []byte) (*broker.SessionState, error) {
	if len(b) == 0 {
		return nil, nil
	}
	d := decoder{b: b}
	if d.byte() != stateVersion {
		return nil, fmt.Errorf("%w: session state version", ErrCorrupt)
	}
	flags, version := d.byte(), d.byte()
	if flags&^(stateFlagDisconnected|stateFlagWill) != 0 || version < 3 || version > 5 {
		d.fail()
	}
	r := &store.SessionRecord{Version: version, ClientID: d.string(), ExpiryInterval: d.uint32()}
	if flags&stateFlagDisconnected != 0 {
		r.DisconnectedAt = time.Unix(0, d.varint())
	}
	n := d.count(4)
	for i := 0; i < n && !d.err; i++ {
		s := store.SubscriptionRecord{Filter: d.string()}
		q, f, rh := d.byte(), d.byte(), d.byte()
		if q > 2 || rh > 2 || f&^(subNoLocal|subRAP) != 0 {
			d.fail()
		}
		s.QoS, s.NoLocal, s.RetainAsPublished, s.RetainHandling = q, f&subNoLocal != 0, f&subRAP != 0, rh
		s.ID = d.uint32()
		r.Subscriptions = append(r.Subscriptions, s)
	}
	if flags&stateFlagWill != 0 {
		r.WillDelay = d.uint32()
		r.Will = d.message()
	}
	st := &broker.SessionState{Record: r}
	n = d.count(5)
	for i := 0; i < n && !d.err; i++ {
		q := &store.QueuedMessage{Seq: d.uvarint()}
		f, qos, state := d.byte(), d.byte(), d.byte()
		if f&^(queuedFlagMsg|queuedFlagRetain) != 0 || qos > 2 || state > store.ReleaseSent {
			d.fail()
		}
		q.QoS, q.State, q.RetainFlag = qos, state, f&queuedFlagRetain != 0
		pid := d.uvarint()
		if pid > 0xFFFF {
			d.fail()
		}
		q.PacketID = uint16(pid)
		ids := d.count(1)
		for j := 0; j < ids && !d.err; j++ {
			q.SubIDs = append(q.SubIDs, d.uint32())
		}
		if f&queuedFlagMsg != 0 {
			q.Msg = d.message()
		} else if state != store.ReleaseSent {
			d.fail() // only a PUBREL awaiting PUBCOMP may lack its message
		}
		st.Messages = append(st.Messages, q)
	}
	n = d.count(1)
	for i := 0; i < n && !d.err; i++ {
		id := d.uvarint()
		if id == 0 || id > 0xFFFF {
			d.fail()
		}
		st.Inbound = append(st.Inbound, uint16(id))
	}
	if err := d.finish("session state"); err != nil {
		return nil, err
	}
	return st, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = appendString(dst, s)
	}
	return dst
}

// decoder reads the primitives; the first error sticks.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) fail() { d.err = true }

func (d *decoder) byte() byte {
	if d.err || len(d.b) == 0 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if v > 0xFFFFFFFF {
		d.err = true
		return 0
	}
	return uint32(v)
}

// count reads an element count, each element taking at least each bytes.
func (d *decoder) count(each int) int {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)/each) {
		d.err = true
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) string() string { return string(d.bytes()) }

func (d *decoder) strings() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := 0; i < n && !d.err; i++ {
		out = append(out, d.string())
	}
	return out
}

func (d *decoder) message() *message.Message {
	b := d.bytes()
	if d.err {
		return nil
	}
	m, err := message.Decode(b)
	if err != nil {
		d.err = true
		return nil
	}
	return m
}

func (d *decoder) finish(what string) error {
	if d.err {
		return fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", ErrCorrupt, what, len(d.b))
	}
	return nil
}
