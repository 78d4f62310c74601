package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// ErrCorrupt reports an encoded message that cannot be decoded.
var ErrCorrupt = errors.New("message: corrupt encoding")

// encodingVersion is the first byte of every encoded message, so the format
// can change without misreading stored data.
const encodingVersion = 1

const (
	flagRetain = 1 << iota
	flagExpiry
)

// Append appends the binary encoding of m to dst.
//
// Layout: version, flags, qos, payload format, created (varint unix nanos),
// [expiry (varint unix nanos)], stamp (uvarint), then length-prefixed topic,
// payload, content type, response topic, correlation data, publisher,
// origin, a count of user properties and each key and value. Lengths are
// uvarints.
func Append(dst []byte, m *Message) []byte {
	var flags byte
	if m.Retain {
		flags |= flagRetain
	}
	if !m.Expiry.IsZero() {
		flags |= flagExpiry
	}
	dst = append(dst, encodingVersion, flags, m.QoS, m.PayloadFormat)
	dst = binary.AppendVarint(dst, unixNano(m.Created))
	if flags&flagExpiry != 0 {
		dst = binary.AppendVarint(dst, m.Expiry.UnixNano())
	}
	dst = binary.AppendUvarint(dst, m.Stamp)
	dst = appendBytes(dst, []byte(m.Topic))
	dst = appendBytes(dst, m.Payload)
	dst = appendBytes(dst, []byte(m.ContentType))
	dst = appendBytes(dst, []byte(m.ResponseTopic))
	dst = appendBytes(dst, m.CorrelationData)
	dst = appendBytes(dst, []byte(m.Publisher))
	dst = appendBytes(dst, []byte(m.Origin))
	dst = binary.AppendUvarint(dst, uint64(len(m.User)))
	for _, u := range m.User {
		dst = appendBytes(dst, []byte(u.Key))
		dst = appendBytes(dst, []byte(u.Value))
	}
	return dst
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Decode decodes a message encoded by Append. The result does not alias b.
func Decode(b []byte) (*Message, error) {
	d := decoder{b: b}
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != encodingVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorrupt, b[0])
	}
	flags, qos, pf := b[1], b[2], b[3]
	if qos > 2 || pf > 1 || flags&^(flagRetain|flagExpiry) != 0 {
		return nil, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	d.b = b[4:]
	m := &Message{QoS: qos, PayloadFormat: pf, Retain: flags&flagRetain != 0}
	if c := d.varint(); c != 0 {
		m.Created = time.Unix(0, c)
	}
	if flags&flagExpiry != 0 {
		m.Expiry = time.Unix(0, d.varint())
	}
	m.Stamp = d.uvarint()
	m.Topic = string(d.bytes())
	m.Payload = d.bytesCopy()
	m.ContentType = string(d.bytes())
	m.ResponseTopic = string(d.bytes())
	m.CorrelationData = d.bytesCopy()
	m.Publisher = string(d.bytes())
	m.Origin = string(d.bytes())
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each property takes at least two bytes
		d.err = true
	}
	if !d.err && n > 0 {
		m.User = make([]UserProperty, 0, n)
		for i := uint64(0); i < n && !d.err; i++ {
			m.User = append(m.User, UserProperty{Key: string(d.bytes()), Value: string(d.bytes())})
		}
	}
	if d.err {
		return nil, fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return m, nil
}

type decoder struct {
	b   []byte
	err bool
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

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) bytesCopy() []byte {
	b := d.bytes()
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
