package peer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
	dst = appendString(dst, h.From)
	dst = appendString(dst, h.To)
	dst = binary.AppendUvarint(dst, h.Incarnation)
	return endFrame(dst, at)
}

func decodeHello(b []byte) (hello, error) {
	d := decoder{b: b}
	h := hello{Version: d.byte(), From: d.string(), To: d.string(), Incarnation: d.uvarint()}
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
	dst = appendString(dst, h.From)
	dst = binary.AppendUvarint(dst, h.Incarnation)
	return endFrame(dst, at)
}

func decodeHelloAck(b []byte) (helloAck, error) {
	d := decoder{b: b}
	h := helloAck{Version: d.byte(), From: d.string(), Incarnation: d.uvarint()}
	return h, d.finish("hello-ack")
}

func appendReject(dst []byte, reason string) []byte {
	dst, at := beginFrame(dst, frameReject)
	dst = appendString(dst, reason)
	return endFrame(dst, at)
}

func decodeReject(b []byte) (string, error) {
	d := decoder{b: b}
	s := d.string()
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
	dst = appendStrings(dst, f.Add)
	dst = appendStrings(dst, f.Remove)
	return endFrame(dst, at)
}

func decodeInterest(b []byte) (interestFrame, error) {
	d := decoder{b: b}
	flags := d.byte()
	f := interestFrame{Full: flags&1 != 0, From: d.uvarint(), To: d.uvarint()}
	f.Add = d.strings()
	f.Remove = d.strings()
	if flags&^1 != 0 {
		d.fail()
	}
	if f.Full && (f.From != 0 || len(f.Remove) != 0) {
		d.fail()
	}
	if !f.Full && f.To <= f.From {
		d.fail()
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
	dst = appendStrings(dst, p.Groups)
	return appendBytes(dst, p.Msg)
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
		dst = appendBytes(dst, m)
	}
	return endFrame(dst, at)
}

// decodePublishBatch calls fn for each item of a publish batch; msg aliases b.
func decodePublishBatch(b []byte, fn func(msg []byte, direct bool, groups []string) error) error {
	d := decoder{b: b}
	n := d.uvarint()
	if n > uint64(len(b)) {
		d.fail()
	}
	for i := uint64(0); i < n && !d.err; i++ {
		flags := d.byte()
		groups := d.strings()
		msg := d.bytes()
		if flags&^1 != 0 {
			d.fail()
		}
		if d.err {
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
	d := decoder{b: b}
	n := d.uvarint()
	if n > uint64(len(b)) {
		d.fail()
	}
	for i := uint64(0); i < n && !d.err; i++ {
		msg := d.bytes()
		if d.err {
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
	d := decoder{b: b}
	r := request{ID: d.uvarint(), Method: d.byte()}
	r.Body = d.rest()
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
	d := decoder{b: b}
	r := response{ID: d.uvarint(), Status: d.byte()}
	r.Body = d.rest()
	if r.ID == 0 || r.Status > statusError {
		d.fail()
	}
	return r, d.finish("response")
}

func appendPing(dst []byte) []byte {
	dst, at := beginFrame(dst, framePing)
	return endFrame(dst, at)
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

// decoder reads the primitives of frame bodies; the first error sticks.
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
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) { // each string takes at least one byte
		d.err = true
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && !d.err; i++ {
		out = append(out, d.string())
	}
	return out
}

func (d *decoder) rest() []byte {
	if d.err {
		return nil
	}
	out := d.b
	d.b = nil
	return out
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
