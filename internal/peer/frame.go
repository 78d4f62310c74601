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

// protocolVersion is carried in the handshake; a node refuses another version.
const protocolVersion = 1

// Frame types. A frame is a 4-byte big-endian length (of type and body),
// the type byte, then the body.
const (
	frameHello     byte = 1 // dialer -> acceptor: version, from, to, incarnation
	frameHelloAck  byte = 2 // acceptor -> dialer: version, from, incarnation
	frameReject    byte = 3 // acceptor -> dialer: reason; the connection closes
	frameInterest  byte = 4 // interest snapshot or delta
	framePublish   byte = 5 // a batch of forwarded publishes
	frameRetained  byte = 6 // a batch of retained updates
	frameRequest   byte = 7 // request id (0: no response wanted), method, body
	frameResponse  byte = 8 // request id, status, body
	framePing      byte = 9 // keeps an idle connection alive; no body
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

// appendPublishItem appends one forwarded publish of a batch: flags (bit 0:
// deliver to direct subscribers), the shared groups to serve, the message's
// encoding.
func appendPublishItem(dst []byte, p *Publish) []byte {
	var flags byte
	if p.Direct {
		flags = 1
	}
	dst = append(dst, flags)
	dst = wire.AppendStrings(dst, p.Groups)
	return wire.AppendBytes(dst, p.Msg)
}

func appendPublishBatch(dst []byte, items []*Publish) []byte {
	dst, at := beginFrame(dst, framePublish)
	dst = binary.AppendUvarint(dst, uint64(len(items)))
	for _, p := range items {
		dst = appendPublishItem(dst, p)
	}
	return endFrame(dst, at)
}

func appendRetainedBatch(dst []byte, msgs [][]byte) []byte {
	dst, at := beginFrame(dst, frameRetained)
	dst = binary.AppendUvarint(dst, uint64(len(msgs)))
	for _, m := range msgs {
		dst = wire.AppendBytes(dst, m)
	}
	return endFrame(dst, at)
}

// decodePublishBatch calls fn for each item of a publish batch; msg aliases b.
func decodePublishBatch(b []byte, fn func(msg []byte, direct bool, groups []string) error) error {
	d := newDecoder(b)
	n := d.Uvarint()
	if n > uint64(len(b)) {
		d.Fail()
	}
	for i := uint64(0); i < n && !d.Failed(); i++ {
		flags := d.Byte()
		groups := d.Strings()
		msg := d.Bytes()
		if flags&^1 != 0 {
			d.Fail()
		}
		if d.Failed() {
			break
		}
		if err := fn(msg, flags&1 != 0, groups); err != nil {
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
