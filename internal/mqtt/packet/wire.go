package packet

import (
	"bytes"
	"unicode/utf8"
)

// Wire-level limits from the specifications (MQTT 5 §1.5, §2.1.4).
const (
	// MaxRemainingLength is the largest value a four-byte Variable Byte
	// Integer can hold, and so the largest remaining length of a packet.
	MaxRemainingLength = 268_435_455
	// MaxPacketSize is the largest whole packet: a first byte, four bytes of
	// remaining length, and MaxRemainingLength bytes.
	MaxPacketSize = 1 + 4 + MaxRemainingLength
	maxVBI        = MaxRemainingLength
	maxString     = 65535
)

// cursor reads the fields of one packet body. Every read checks the bytes
// left, so a length field can never make it read past the packet or allocate.
type cursor struct {
	b []byte
	i int
}

func (c *cursor) left() int { return len(c.b) - c.i }

func (c *cursor) u8(what string) (byte, error) {
	if c.i >= len(c.b) {
		return 0, overrun(what)
	}
	v := c.b[c.i]
	c.i++
	return v, nil
}

func (c *cursor) u16(what string) (uint16, error) {
	if len(c.b)-c.i < 2 {
		return 0, overrun(what)
	}
	v := uint16(c.b[c.i])<<8 | uint16(c.b[c.i+1])
	c.i += 2
	return v, nil
}

func (c *cursor) u32(what string) (uint32, error) {
	if len(c.b)-c.i < 4 {
		return 0, overrun(what)
	}
	b := c.b[c.i : c.i+4]
	c.i += 4
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), nil
}

// vbi reads a Variable Byte Integer: at most four bytes, minimally encoded.
func (c *cursor) vbi(what string) (uint32, error) {
	v, n, err := readVBI(c.b[c.i:])
	if err != nil {
		if n == 0 {
			return 0, overrun(what)
		}
		return 0, malformed(what + ": " + err.Error())
	}
	c.i += n
	return v, nil
}

// binary reads two-byte-length-prefixed Binary Data. The result aliases the
// packet; an empty value is nil.
func (c *cursor) binary(what string) ([]byte, error) {
	n, err := c.u16(what)
	if err != nil {
		return nil, err
	}
	if int(n) > len(c.b)-c.i {
		return nil, overrun(what)
	}
	if n == 0 {
		return nil, nil
	}
	v := c.b[c.i : c.i+int(n) : c.i+int(n)]
	c.i += int(n)
	return v, nil
}

// utf8 reads a UTF-8 Encoded String and returns its bytes (aliasing the
// packet) after checking that it is well formed.
func (c *cursor) utf8(what string) ([]byte, error) {
	b, err := c.binary(what)
	if err != nil {
		return nil, err
	}
	if err := checkUTF8(b, what); err != nil {
		return nil, err
	}
	return b, nil
}

// str reads a UTF-8 Encoded String as a Go string (one allocation unless empty).
func (c *cursor) str(what string) (string, error) {
	b, err := c.utf8(what)
	return string(b), err
}

// rest returns the unread bytes (nil if none) and consumes them.
func (c *cursor) rest() []byte {
	if c.i >= len(c.b) {
		return nil
	}
	v := c.b[c.i:len(c.b):len(c.b)]
	c.i = len(c.b)
	return v
}

func overrun(what string) error { return malformed(what + ": length overruns the packet") }

// errShortVBI and errLongVBI are internal markers for readVBI.
type vbiError string

func (e vbiError) Error() string { return string(e) }

const (
	errShortVBI   vbiError = "truncated variable byte integer"
	errLongVBI    vbiError = "variable byte integer longer than four bytes"
	errNonMinimal vbiError = "variable byte integer not minimally encoded"
)

// readVBI decodes a Variable Byte Integer from the start of b. It returns the
// value and the bytes used; on errShortVBI n is 0 (more bytes are needed).
func readVBI(b []byte) (v uint32, n int, err error) {
	var shift uint
	for i := 0; i < 4; i++ {
		if i >= len(b) {
			return 0, 0, errShortVBI
		}
		c := b[i]
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			// A last byte of zero after a continuation byte encodes
			// nothing: the value fits in fewer bytes [MQTT-1.5.5-1].
			if c == 0 && i > 0 {
				return 0, i + 1, errNonMinimal
			}
			return v, i + 1, nil
		}
		shift += 7
	}
	return 0, 4, errLongVBI
}

func vbiLen(v int) int {
	switch {
	case v < 128:
		return 1
	case v < 16384:
		return 2
	case v < 2097152:
		return 3
	default:
		return 4
	}
}

func appendVBI(dst []byte, v int) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}

func appendU16(dst []byte, v uint16) []byte { return append(dst, byte(v>>8), byte(v)) }

func appendU32(dst []byte, v uint32) []byte {
	return append(dst, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendString(dst []byte, s string) []byte {
	dst = appendU16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendBinary(dst []byte, b []byte) []byte {
	dst = appendU16(dst, uint16(len(b)))
	return append(dst, b...)
}

// checkUTF8 enforces the rules for UTF-8 Encoded Strings (MQTT 5 §1.5.4,
// 3.1.1 §1.5.3): well-formed UTF-8, no surrogate code points (Go's decoder
// rejects their encodings), and no U+0000. Violations are malformed packets.
// Strings are mostly short and ASCII, so one byte loop handles that case.
func checkUTF8(b []byte, what string) error {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == 0 {
			return malformed(what + ": string contains U+0000")
		}
		if c >= utf8.RuneSelf {
			return checkUTF8Slow(b[i:], what)
		}
	}
	return nil
}

func checkUTF8Slow(b []byte, what string) error {
	if bytes.IndexByte(b, 0) >= 0 {
		return malformed(what + ": string contains U+0000")
	}
	if !utf8.Valid(b) {
		return malformed(what + ": string is not well-formed UTF-8")
	}
	return nil
}

// checkTopic checks a topic name: a valid UTF-8 Encoded String without
// wildcard characters [MQTT-3.3.2-2], in one pass for the ASCII case.
func checkTopic(b []byte, what string) error {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '+' || c == '#':
			if err := checkUTF8(b, what); err != nil {
				return err
			}
			return protocolErr(what + ": wildcard in topic name")
		case c == 0 || c >= utf8.RuneSelf:
			if err := checkUTF8(b[i:], what); err != nil {
				return err
			}
			if hasWildcard(b[i:]) {
				return protocolErr(what + ": wildcard in topic name")
			}
			return nil
		}
	}
	return nil
}

// checkString is checkUTF8 plus the length limit, for the encoder.
func checkString(s, what string) error {
	if len(s) > maxString {
		return malformed(what + ": string longer than 65535 bytes")
	}
	if !validUTF8String(s) {
		return malformed(what + ": not a valid UTF-8 Encoded String")
	}
	return nil
}

func checkBinary(b []byte, what string) error {
	if len(b) > maxString {
		return malformed(what + ": binary data longer than 65535 bytes")
	}
	return nil
}

func validUTF8String(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return utf8.ValidString(s)
}

// HasDiscouragedRunes reports whether s contains code points that MQTT
// allows in UTF-8 Encoded Strings but says a receiver may treat as a reason
// to close the connection: control characters U+0001..U+001F and
// U+007F..U+009F, and Unicode non-characters (MQTT 5 §1.5.4). The codec
// accepts them; a server applies this check where its policy wants it.
func HasDiscouragedRunes(s string) bool {
	for _, r := range s {
		switch {
		case r < 0x20, r >= 0x7f && r <= 0x9f:
			return true
		case r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE:
			return true
		}
	}
	return false
}

// hasWildcard reports whether a topic name contains a wildcard character.
func hasWildcard(b []byte) bool { return bytes.IndexByte(b, '+') >= 0 || bytes.IndexByte(b, '#') >= 0 }

func hasWildcardString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '+' || s[i] == '#' {
			return true
		}
	}
	return false
}
