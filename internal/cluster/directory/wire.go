package directory

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/store"
	"github.com/sextantmq/sextant/internal/wire"
)

// ErrCorrupt reports a request or answer from a peer that cannot be decoded.
var ErrCorrupt = errors.New("directory: corrupt encoding")

// Request methods on peer links.
const (
	methodRegister   byte = 1 // directory owner: a client connected to a node; answer: previous claim
	methodAssert     byte = 2 // directory owner: a holder re-registers sessions; answer: those held elsewhere since
	methodUnregister byte = 3 // directory owner (notification): a session ended on a node
	methodHandOver   byte = 4 // holder: close the client's connection and send the session (kept until released)
	methodDrop       byte = 5 // holder (notification): a newer claim exists; drop a stale session
	// 6 and 11 are the cluster layer's round-trip probe and session relay
	// (package cluster), which share the peer links' method numbers with
	// the directory.
	methodRelease byte = 7 // holder (notification): the session it sent arrived; end it there
	methodRestore byte = 8 // directory owner (notification): a hand-over was abandoned; the old claim stands again
	methodSettle  byte = 9 // new node: is this hand-over abandoned? answer: 1 (not held here: the holder keeps it) or 0
	// directory owner: a clean start's claim, sent after its CONNACK;
	// answer: appendRegistered
	methodRegisterClean byte = 10
)

// stateVersion is the first byte of an encoded session state. Version 2
// carries the session record and its messages in the store's own layout
// (store.AppendSessionRecord, store.AppendQueuedRecord); version 1 had a
// layout of its own, and a node refuses a hand-over from a node of the
// other version (the CONNECT then starts afresh, as for any failed
// hand-over).
const stateVersion = 2

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
	dst = wire.AppendString(dst, c.ClientID)
	dst = wire.AppendString(dst, c.Node)
	return binary.AppendUvarint(dst, c.Stamp)
}

func decodeClaim(b []byte) (claim, error) {
	d := newDecoder(b)
	c := claim{ClientID: d.Str(), Node: d.Str(), Stamp: d.Uvarint()}
	return c, d.finish("claim")
}

// appendPrevious encodes the answer to a register request: the claim it
// replaced, or nothing when there was none.
func appendPrevious(dst []byte, prev claim) []byte {
	if prev.Node == "" {
		return dst
	}
	return appendClaim(dst, prev)
}

func decodePrevious(b []byte) (claim, error) {
	if len(b) == 0 {
		return claim{}, nil
	}
	return decodeClaim(b)
}

// appendClientID encodes a release request.
func appendClientID(dst []byte, id string) []byte { return wire.AppendString(dst, id) }

func decodeClientID(b []byte) (string, error) {
	d := newDecoder(b)
	id := d.Str()
	return id, d.finish("client id")
}

// appendRegistered encodes the answer to a clean start's registration: a
// status byte (0: registered, 1: superseded by a newer claim), then for 0
// the claim it replaced, if any.
func appendRegistered(dst []byte, prev claim, superseded bool) []byte {
	if superseded {
		return append(dst, 1)
	}
	return appendPrevious(append(dst, 0), prev)
}

func decodeRegistered(b []byte) (prev claim, superseded bool, err error) {
	switch {
	case len(b) == 1 && b[0] == 1:
		return claim{}, true, nil
	case len(b) >= 1 && b[0] == 0:
		prev, err = decodePrevious(b[1:])
		return prev, false, err
	}
	return claim{}, false, fmt.Errorf("%w: registration answer", ErrCorrupt)
}

// appendRestore encodes an abandoned hand-over: the requester's claim, and
// the claim it replaced, which stands again if the requester's is current.
func appendRestore(dst []byte, mine, prev claim) []byte {
	dst = appendClaim(dst, mine)
	dst = wire.AppendString(dst, prev.Node)
	return binary.AppendUvarint(dst, prev.Stamp)
}

func decodeRestore(b []byte) (mine, prev claim, err error) {
	d := newDecoder(b)
	mine = claim{ClientID: d.Str(), Node: d.Str(), Stamp: d.Uvarint()}
	prev = claim{ClientID: mine.ClientID, Node: d.Str(), Stamp: d.Uvarint()}
	return mine, prev, d.finish("restore")
}

// appendAssert encodes a holder's re-registration of many sessions.
func appendAssert(dst []byte, node string, ids []string, stamps []uint64) []byte {
	dst = wire.AppendString(dst, node)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for i, id := range ids {
		dst = wire.AppendString(dst, id)
		dst = binary.AppendUvarint(dst, stamps[i])
	}
	return dst
}

func decodeAssert(b []byte) (node string, ids []string, stamps []uint64, err error) {
	d := newDecoder(b)
	node = d.Str()
	n := d.Count(2)
	for i := 0; i < n && !d.Failed(); i++ {
		ids = append(ids, d.Str())
		stamps = append(stamps, d.Uvarint())
	}
	return node, ids, stamps, d.finish("assert")
}

func appendStringList(dst []byte, ss []string) []byte { return wire.AppendStrings(dst, ss) }

func decodeStringList(b []byte) ([]string, error) {
	d := newDecoder(b)
	ss := d.Strings()
	return ss, d.finish("string list")
}

// appendHandOver encodes a hand-over request.
func appendHandOver(dst []byte, clientID string, cleanStart bool) []byte {
	dst = wire.AppendString(dst, clientID)
	if cleanStart {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func decodeHandOver(b []byte) (clientID string, cleanStart bool, err error) {
	d := newDecoder(b)
	clientID = d.Str()
	f := d.Byte()
	if f > 1 {
		d.Fail()
	}
	return clientID, f == 1, d.finish("hand-over")
}

// appendState encodes a moving session: nothing for nil, else the version
// byte, the client id, the session record (as the store keeps it, will
// included if any), the queued and in-flight messages in order (each its
// sequence number and stored record), and the inbound QoS 2 ids.
func appendState(dst []byte, st *broker.SessionState) []byte {
	if st == nil || st.Record == nil {
		return dst
	}
	dst = append(dst, stateVersion)
	dst = wire.AppendString(dst, st.Record.ClientID)
	dst = wire.AppendBytes(dst, store.AppendSessionRecord(nil, st.Record))
	dst = binary.AppendUvarint(dst, uint64(len(st.Messages)))
	for _, q := range st.Messages {
		dst = binary.AppendUvarint(dst, q.Seq)
		dst = wire.AppendBytes(dst, store.AppendQueuedRecord(nil, q))
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
	d := newDecoder(b)
	if d.Byte() != stateVersion {
		return nil, fmt.Errorf("%w: session state version", ErrCorrupt)
	}
	id := d.Str()
	rec := d.Bytes()
	if d.Failed() {
		return nil, d.finish("session state")
	}
	r, err := store.DecodeSessionRecord(id, rec)
	if err != nil {
		return nil, fmt.Errorf("%w: session state: %w", ErrCorrupt, err)
	}
	st := &broker.SessionState{Record: r}
	n := d.Count(2)
	for i := 0; i < n && !d.Failed(); i++ {
		seq := d.Uvarint()
		rec := d.Bytes()
		if d.Failed() {
			break
		}
		q, err := store.DecodeQueuedRecord(seq, rec)
		if err != nil {
			return nil, fmt.Errorf("%w: session state: %w", ErrCorrupt, err)
		}
		st.Messages = append(st.Messages, q)
	}
	n = d.Count(1)
	for i := 0; i < n && !d.Failed(); i++ {
		id := d.Uvarint()
		if id == 0 || id > 0xFFFF {
			d.Fail()
		}
		st.Inbound = append(st.Inbound, uint16(id))
	}
	if err := d.finish("session state"); err != nil {
		return nil, err
	}
	return st, nil
}

// decoder is wire.Decoder with this package's record-level helpers.
type decoder struct{ wire.Decoder }

func newDecoder(b []byte) *decoder { return &decoder{wire.NewDecoder(b)} }

// finish wraps a failure as ErrCorrupt, naming what was decoded.
func (d *decoder) finish(what string) error {
	if err := d.Finish(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	return nil
}
