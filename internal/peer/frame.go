package peer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/sextantmq/sextant/internal/wire"
)

// ErrCorrupt reports a frame that cannot be decoded. A link that reads one
// closes its connection (and reconnects).
var ErrCorrupt = errors.New("peer: corrupt frame")

// ErrFrameTooLarge reports a frame longer than the configured maximum.
var ErrFrameTooLarge = errors.New("peer: frame too large")

// Kind is the first byte of every connection to a node's peer address; the
// node's listener mux routes connections starting with it to the peer
// layer (the metadata group uses other bytes on the same listener).
const Kind byte = 'P'

// protocolVersion is carried in the handshake; a node refuses another
// version. Version 2 numbers and acknowledges forwarded QoS 1/2 messages
// and adds transit and reach frames.
const protocolVersion = 2

// Frame types. A frame is a 4-byte big-endian length (of type and body),
// the type byte, then the body.
const (
	frameHello     byte = 1  // dialer -> acceptor: version, from, to, incarnation
	frameHelloAck  byte = 2  // acceptor -> dialer: version, from, incarnation
	frameReject    byte = 3  // acceptor -> dialer: reason; the connection closes
	frameInterest  byte = 4  // interest snapshot or delta
	framePublish   byte = 5  // a batch of forwarded publishes: epoch, base, numbered items
	frameRetained  byte = 6  // a batch of retained updates
	frameRequest   byte = 7  // request id (0: no response wanted), method, body
	frameResponse  byte = 8  // request id, status, body
	framePing      byte = 9  // keeps an idle connection alive; no body
	frameAck       byte = 10 // cumulative acknowledgement of an origin's publishes
	frameTransit   byte = 11 // a publish batch, ack or retained batch between two other nodes
	frameReach     byte = 12 // the peers this node hears from and can send to
	frameHeaderLen      = 5
)

// frameName names frame types for logs and errors.
func frameName(t byte) string {
	switch t {
	case frameHello:
		return "hello"
	case frameHelloAck:
		return "hello-ack"
	case frameReject:
		return "reject"
	case frameInterest:
		return "interest"
	case framePublish:
		return "publish"
	case frameRetained:
		return "retained"
	case frameRequest:
		return "request"
	case frameResponse:
		return "response"
	case framePing:
		return "ping"
	case frameAck:
		return "ack"
	case frameTransit:
		return "transit"
	case frameReach:
		return "reach"
	}
	return fmt.Sprintf("unknown(%d)", t)
}

// beginFrame appends a frame header with a placeholder length; endFrame
// fills the length in once the body is appended.
func beginFrame(dst []byte, typ byte) ([]byte, int) {
	at := len(dst)
	return append(dst, 0, 0, 0, 0, typ), at
}

func endFrame(dst []byte, at int) []byte {
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// readFrame reads one frame into buf (grown as needed) and returns its type
// and body, which alias buf.
func readFrame(r *bufio.Reader, buf []byte, limit int) (typ byte, body, out []byte, err error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, buf, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:4]))
	if n < 1 {
		return 0, nil, buf, fmt.Errorf("%w: empty frame", ErrCorrupt)
	}
	if n-1 > limit {
		return 0, nil, buf, fmt.Errorf("%w: %s frame of %d bytes (limit %d)", ErrFrameTooLarge, frameName(hdr[4]), n, limit)
	}
	if cap(buf) < n-1 {
		buf = make([]byte, n-1, max(n-1, 2*cap(buf)))
	}
	body = buf[:n-1]
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	return hdr[4], body, buf, nil
}

// hello opens a connection.
type hello struct {
	Version     byte
	From, To    string
	Incarnation uint64
}

func appendHello(dst []byte, h hello) []byte {
	dst, at := beginFrame(dst, frameHello)
	dst = append(dst, h.Version)
	dst = wire.AppendString(dst, h.From)
	dst = wire.AppendString(dst, h.To)
	dst = binary.AppendUvarint(dst, h.Incarnation)
	return endFrame(dst, at)
}

func decodeHello(b []byte) (hello, error) {
	d := newDecoder(b)
	h := hello{Version: d.Byte(), From: d.Str(), To: d.Str(), Incarnation: d.Uvarint()}
	return h, d.finish("hello")
}

// helloAck accepts a connection.
type helloAck struct {
	Version     byte
	From        string
	Incarnation uint64
}

func appendHelloAck(dst []byte, h helloAck) []byte {
	dst, at := beginFrame(dst, frameHelloAck)
	dst = append(dst, h.Version)
	dst = wire.AppendString(dst, h.From)
	dst = binary.AppendUvarint(dst, h.Incarnation)
	return endFrame(dst, at)
}

func decodeHelloAck(b []byte) (helloAck, error) {
	d := newDecoder(b)
	h := helloAck{Version: d.Byte(), From: d.Str(), Incarnation: d.Uvarint()}
	return h, d.finish("hello-ack")
}

func appendReject(dst []byte, reason string) []byte {
	dst, at := beginFrame(dst, frameReject)
	dst = wire.AppendString(dst, reason)
	return endFrame(dst, at)
}

func decodeReject(b []byte) (string, error) {
	d := newDecoder(b)
	s := d.Str()
	return s, d.finish("reject")
}

// interestFrame is a snapshot (Full: Add holds every filter, From is 0) or a
// delta from version From to version To.
type interestFrame struct {
	Full        bool
	From, To    uint64
	Add, Remove []string
}

func appendInterest(dst []byte, f interestFrame) []byte {
	dst, at := beginFrame(dst, frameInterest)
	var flags byte
	if f.Full {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, f.From)
	dst = binary.AppendUvarint(dst, f.To)
	dst = wire.AppendStrings(dst, f.Add)
	dst = wire.AppendStrings(dst, f.Remove)
	return endFrame(dst, at)
}

func decodeInterest(b []byte) (interestFrame, error) {
	d := newDecoder(b)
	flags := d.Byte()
	f := interestFrame{Full: flags&1 != 0, From: d.Uvarint(), To: d.Uvarint()}
	f.Add = d.Strings()
	f.Remove = d.Strings()
	if flags&^1 != 0 {
		d.Fail()
	}
	if f.Full && (f.From != 0 || len(f.Remove) != 0) {
		d.Fail()
	}
	if !f.Full && f.To <= f.From {
		d.Fail()
	}
	return f, d.finish("interest")
}

// batchHeader opens a publish batch: the epoch of the sender's outbox and
// its base (the lowest sequence number it may still send; the receiver
// skips what is below).
type batchHeader struct {
	Inc, Gen, Base uint64
}

// Flags of a publish item.
const (
	itemDirect byte = 1 << 0 // deliver to direct subscribers
	itemAcked  byte = 1 << 1 // QoS 1/2: numbered in the acknowledged sequence
)

// appendPublishItem appends one forwarded publish of a batch: flags, its
// number in the outbox (in the acknowledged sequence, or the QoS 0 one),
// the shared groups to serve, the message's encoding.
func appendPublishItem(dst []byte, p *Publish) []byte {
	var flags byte
	if p.Direct {
		flags |= itemDirect
	}
	if p.acked() {
		flags |= itemAcked
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, p.seq)
	dst = wire.AppendStrings(dst, p.Groups)
	return wire.AppendBytes(dst, p.Msg)
}

func appendPublishBatch(dst []byte, h batchHeader, items []*Publish) []byte {
	dst, at := beginFrame(dst, framePublish)
	dst = appendPublishBody(dst, h, items)
	return endFrame(dst, at)
}

func appendPublishBody(dst []byte, h batchHeader, items []*Publish) []byte {
	dst = binary.AppendUvarint(dst, h.Inc)
	dst = binary.AppendUvarint(dst, h.Gen)
	dst = binary.AppendUvarint(dst, h.Base)
	dst = binary.AppendUvarint(dst, uint64(len(items)))
	for _, p := range items {
		dst = appendPublishItem(dst, p)
	}
	return dst
}

func appendRetainedBatch(dst []byte, msgs [][]byte) []byte {
	dst, at := beginFrame(dst, frameRetained)
	dst = binary.AppendUvarint(dst, uint64(len(msgs)))
	for _, m := range msgs {
		dst = wire.AppendBytes(dst, m)
	}
	return endFrame(dst, at)
}

// publishItem is one decoded item of a publish batch; Msg aliases the
// frame.
type publishItem struct {
	Seq    uint64
	Acked  bool // Seq is in the acknowledged sequence (else the QoS 0 one)
	Direct bool
	Groups []string
	Msg    []byte
}

// decodePublishBatch decodes a batch's header, then calls fn for each item.
// The header is checked before the first item: a body whose header does not
// decode calls fn for nothing.
func decodePublishBatch(b []byte, head func(batchHeader) error, fn func(publishItem) error) error {
	d := newDecoder(b)
	h := batchHeader{Inc: d.Uvarint(), Gen: d.Uvarint(), Base: d.Uvarint()}
	n := d.Uvarint()
	if n > uint64(len(b)) || h.Base == 0 {
		d.Fail()
	}
	if d.Failed() {
		return d.finish("publish")
	}
	if err := head(h); err != nil {
		return err
	}
	for i := uint64(0); i < n && !d.Failed(); i++ {
		flags := d.Byte()
		it := publishItem{Seq: d.Uvarint(), Direct: flags&itemDirect != 0, Acked: flags&itemAcked != 0}
		it.Groups = d.Strings()
		it.Msg = d.Bytes()
		if flags&^(itemDirect|itemAcked) != 0 || it.Seq == 0 {
			d.Fail()
		}
		if d.Failed() {
			break
		}
		if err := fn(it); err != nil {
			return err
		}
	}
	return d.finish("publish")
}

// decodeRetainedBatch calls fn for each message encoding of a retained
// batch; msg aliases b.
func decodeRetainedBatch(b []byte, fn func(msg []byte) error) error {
	d := newDecoder(b)
	n := d.Uvarint()
	if n > uint64(len(b)) {
		d.Fail()
	}
	for i := uint64(0); i < n && !d.Failed(); i++ {
		msg := d.Bytes()
		if d.Failed() {
			break
		}
		if err := fn(msg); err != nil {
			return err
		}
	}
	return d.finish("retained")
}

// request is a call (ID > 0) or a notification (ID 0).
type request struct {
	ID     uint64
	Method byte
	Body   []byte
}

func appendRequest(dst []byte, r request) []byte {
	dst, at := beginFrame(dst, frameRequest)
	dst = binary.AppendUvarint(dst, r.ID)
	dst = append(dst, r.Method)
	dst = append(dst, r.Body...)
	return endFrame(dst, at)
}

func decodeRequest(b []byte) (request, error) {
	d := newDecoder(b)
	r := request{ID: d.Uvarint(), Method: d.Byte()}
	r.Body = d.Rest()
	return r, d.finish("request")
}

// Response statuses.
const (
	statusOK    byte = 0
	statusError byte = 1 // Body is the error text
)

type response struct {
	ID     uint64
	Status byte
	Body   []byte
}

func appendResponse(dst []byte, r response) []byte {
	dst, at := beginFrame(dst, frameResponse)
	dst = binary.AppendUvarint(dst, r.ID)
	dst = append(dst, r.Status)
	dst = append(dst, r.Body...)
	return endFrame(dst, at)
}

func decodeResponse(b []byte) (response, error) {
	d := newDecoder(b)
	r := response{ID: d.Uvarint(), Status: d.Byte()}
	r.Body = d.Rest()
	if r.ID == 0 || r.Status > statusError {
		d.Fail()
	}
	return r, d.finish("response")
}

// ackFrame acknowledges every message numbered up to Seq of an outbox's
// epoch (Inc, Gen).
type ackFrame struct {
	Inc, Gen, Seq uint64
}

func appendAck(dst []byte, a ackFrame) []byte {
	dst, at := beginFrame(dst, frameAck)
	dst = appendAckBody(dst, a)
	return endFrame(dst, at)
}

func appendAckBody(dst []byte, a ackFrame) []byte {
	dst = binary.AppendUvarint(dst, a.Inc)
	dst = binary.AppendUvarint(dst, a.Gen)
	return binary.AppendUvarint(dst, a.Seq)
}

func decodeAck(b []byte) (ackFrame, error) {
	d := newDecoder(b)
	a := ackFrame{Inc: d.Uvarint(), Gen: d.Uvarint(), Seq: d.Uvarint()}
	if a.Seq == 0 {
		d.Fail()
	}
	return a, d.finish("ack")
}

// transitHeader addresses a frame that travels from one node to another
// through a third (the transit node): From is its origin, To its
// destination, Type the type of the frame it carries (a publish batch, an
// ack or a retained batch), whose body follows.
type transitHeader struct {
	From, To string
	Type     byte
}

// transitCarries reports whether a frame type may travel in transit.
func transitCarries(t byte) bool {
	return t == framePublish || t == frameAck || t == frameRetained
}

// beginTransit opens a transit frame; the caller appends the carried body
// and calls endFrame.
func beginTransit(dst []byte, h transitHeader) ([]byte, int) {
	dst, at := beginFrame(dst, frameTransit)
	dst = wire.AppendString(dst, h.From)
	dst = wire.AppendString(dst, h.To)
	return append(dst, h.Type), at
}

// decodeTransit splits a transit frame's body into its header and the
// carried body, which aliases b.
func decodeTransit(b []byte) (transitHeader, []byte, error) {
	d := newDecoder(b)
	h := transitHeader{From: d.Str(), To: d.Str(), Type: d.Byte()}
	if !transitCarries(h.Type) || h.From == "" || h.To == "" || h.From == h.To {
		d.Fail()
	}
	body := d.Rest()
	return h, body, d.finish("transit")
}

// reachFrame says which peers the sender hears from (it received from them
// within the stall timeout) and which it can send to (it hears them, and
// they said they hear it): another node may route through it to the
// latter.
type reachFrame struct {
	Heard, Sends []string
}

func appendReach(dst []byte, r reachFrame) []byte {
	dst, at := beginFrame(dst, frameReach)
	dst = wire.AppendStrings(dst, r.Heard)
	dst = wire.AppendStrings(dst, r.Sends)
	return endFrame(dst, at)
}

func decodeReach(b []byte) (reachFrame, error) {
	d := newDecoder(b)
	r := reachFrame{Heard: d.Strings(), Sends: d.Strings()}
	return r, d.finish("reach")
}

func appendPing(dst []byte) []byte {
	dst, at := beginFrame(dst, framePing)
	return endFrame(dst, at)
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
