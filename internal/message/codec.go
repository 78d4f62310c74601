package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/wire"
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
	dst = wire.AppendString(dst, m.Topic)
	dst = wire.AppendBytes(dst, m.Payload)
	dst = wire.AppendString(dst, m.ContentType)
	dst = wire.AppendString(dst, m.ResponseTopic)
	dst = wire.AppendBytes(dst, m.CorrelationData)
	dst = wire.AppendString(dst, m.Publisher)
	dst = wire.AppendString(dst, m.Origin)
	dst = binary.AppendUvarint(dst, uint64(len(m.User)))
	for _, u := range m.User {
		dst = wire.AppendString(dst, u.Key)
		dst = wire.AppendString(dst, u.Value)
	}
	return dst
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Decode decodes a message encoded by Append. The result does not alias b.
func Decode(b []byte) (*Message, error) { return decode(b, nil, 0) }

// DecodeAfter decodes a message of a run (the records of one placement
// group, say): a string field equal to prev's is prev's string, not a new
// one, since such runs mostly share their topic, publisher and origin and
// each string would be an allocation per message. Its user properties have
// room for spare more, so a caller that adds its own does not grow them.
// prev may be nil. The result does not alias b.
func DecodeAfter(b []byte, prev *Message, spare int) (*Message, error) { return decode(b, prev, spare) }

func decode(b []byte, prev *Message, spare int) (*Message, error) {
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
	was := prev // whose strings equal ones are shared
	if was == nil {
		was = &noMessage
	}
	d := wire.NewDecoder(b[4:])
	m := &Message{QoS: qos, PayloadFormat: pf, Retain: flags&flagRetain != 0}
	if c := d.Varint(); c != 0 {
		m.Created = time.Unix(0, c)
	}
	if flags&flagExpiry != 0 {
		m.Expiry = time.Unix(0, d.Varint())
	}
	m.Stamp = d.Uvarint()
	m.Topic = strLike(&d, was.Topic)
	m.Payload = d.BytesCopy()
	m.ContentType = strLike(&d, was.ContentType)
	m.ResponseTopic = strLike(&d, was.ResponseTopic)
	m.CorrelationData = d.BytesCopy()
	m.Publisher = strLike(&d, was.Publisher)
	m.Origin = strLike(&d, was.Origin)
	if n := d.Count(2); n+spare > 0 { // each property takes at least two bytes
		m.User = make([]UserProperty, 0, n+spare)
		for i := 0; i < n && !d.Failed(); i++ {
			m.User = append(m.User, UserProperty{Key: d.Str(), Value: d.Str()})
		}
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return m, nil
}

// noMessage is the previous message of one decoded alone: its strings are
// all empty, so nothing is shared. Read only.
var noMessage Message

// strLike reads a length-prefixed string: like itself when the bytes equal
// it (comparing allocates nothing), else a new string.
func strLike(d *wire.Decoder, like string) string {
	if b := d.Bytes(); string(b) != like {
		return string(b)
	}
	return like
}
