package bench

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"time"
)

// Header is what the generator writes at the start of every payload:
//
//	offset 0  2 bytes  magic "SX"
//	offset 2  8 bytes  send time, Unix nanoseconds, big endian
//	offset 10 4 bytes  publisher index, big endian
//	offset 14 4 bytes  sequence number within the publisher, big endian
//
// The rest of the payload is filler.
type Header struct {
	Sent time.Time
	Pub  uint32
	Seq  uint32
}

// The header's magic bytes.
const magic0, magic1 = 'S', 'X'

// PutHeader writes h into the first HeaderSize bytes of b.
func PutHeader(b []byte, h Header) {
	_ = b[HeaderSize-1]
	b[0], b[1] = magic0, magic1
	binary.BigEndian.PutUint64(b[2:], uint64(h.Sent.UnixNano()))
	binary.BigEndian.PutUint32(b[10:], h.Pub)
	binary.BigEndian.PutUint32(b[14:], h.Seq)
}

// ParseHeader reads a header from the start of b.
func ParseHeader(b []byte) (Header, bool) {
	if len(b) < HeaderSize || b[0] != magic0 || b[1] != magic1 {
		return Header{}, false
	}
	return Header{
		Sent: time.Unix(0, int64(binary.BigEndian.Uint64(b[2:]))),
		Pub:  binary.BigEndian.Uint32(b[10:]),
		Seq:  binary.BigEndian.Uint32(b[14:]),
	}, true
}

// textStamp starts a payload stamped by `sextant pub --stamp`:
// "sx-ts=<Unix nanoseconds>;" followed by the message.
const textStamp = "sx-ts="

// AppendStamp appends the text send stamp for t to dst; the message follows.
func AppendStamp(dst []byte, t time.Time) []byte {
	dst = append(dst, textStamp...)
	dst = strconv.AppendInt(dst, t.UnixNano(), 10)
	return append(dst, ';')
}

// ParseStamp finds a send time at the start of payload: the text stamp of
// `sextant pub --stamp`, or a generator header. It returns the time and the
// payload after a text stamp (the whole payload for a header).
func ParseStamp(payload []byte) (sent time.Time, rest []byte, ok bool) {
	if h, ok := ParseHeader(payload); ok {
		return h.Sent, payload, true
	}
	if !bytes.HasPrefix(payload, []byte(textStamp)) {
		return time.Time{}, payload, false
	}
	end := bytes.IndexByte(payload, ';')
	if end < 0 {
		return time.Time{}, payload, false
	}
	ns, err := strconv.ParseInt(string(payload[len(textStamp):end]), 10, 64)
	if err != nil {
		return time.Time{}, payload, false
	}
	return time.Unix(0, ns), payload[end+1:], true
}
