package packettest

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Vector is one annotated packet encoding.
type Vector struct {
	Name string
	// Version is the protocol version the decoder runs with: for CONNECT
	// the level on the wire (a CONNECT also decodes before any version is
	// set), 0 for vectors about the state before CONNECT.
	Version packet.Version
	// Hex is the encoding: pairs of hex digits, "quoted text" standing for
	// its bytes (Go escapes allowed), and // comments to the end of line.
	Hex string
	// Packet is what the bytes decode to; nil for an invalid vector.
	Packet packet.Packet
	// NonCanonical marks a valid encoding that Append does not produce
	// (for example an MQTT 5 PUBACK with an explicit Success code and
	// empty properties): it decodes to Packet, which re-encodes shorter.
	NonCanonical bool
	// Err is the sentinel an invalid vector's error wraps, and Code the
	// reason code it carries (packet.CodeOf).
	Err  error
	Code packet.ReasonCode
	// Spec names the normative statement or section the vector exercises.
	Spec string
}

// Valid reports whether the vector decodes successfully.
func (v Vector) Valid() bool { return v.Err == nil }

// Bytes returns the vector's bytes. It panics if Hex does not parse: the
// vectors are static data, and TestVectorsParse checks them all.
func (v Vector) Bytes() []byte {
	b, err := ParseHex(v.Hex)
	if err != nil {
		panic("packettest: vector " + v.Name + ": " + err.Error())
	}
	return b
}

// ParseHex parses annotated hex: hex digit pairs (whitespace between pairs
// optional), "quoted strings" (Go syntax, contributing their bytes), and
// comments from // to the end of the line.
func ParseHex(s string) ([]byte, error) {
	var out []byte
	for len(s) > 0 {
		switch c := s[0]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s = s[1:]
		case strings.HasPrefix(s, "//"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return out, nil
			}
			s = s[i:]
		case c == '"':
			i := 1
			for i < len(s) && s[i] != '"' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return nil, errors.New("unterminated string")
			}
			text, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, text...)
			s = s[i+1:]
		default:
			i := 0
			for i < len(s) && isHex(s[i]) {
				i++
			}
			if i == 0 || i%2 != 0 {
				return nil, errors.New("bad hex near " + strconv.Quote(head(s)))
			}
			b, err := hex.DecodeString(s[:i])
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
			s = s[i:]
		}
	}
	return out, nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func head(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// Valid returns the vectors that decode, for both protocol versions.
func Valid() []Vector { return append(valid311(), valid5()...) }

// Invalid returns the vectors that must be rejected.
func Invalid() []Vector { return append(invalidHeader(), invalidPackets()...) }

// All returns Valid followed by Invalid.
func All() []Vector { return append(Valid(), Invalid()...) }

// Common expected errors.
func malformed(v Vector) Vector {
	v.Err, v.Code = packet.ErrMalformed, packet.MalformedPacket
	return v
}

func protocol(v Vector) Vector {
	v.Err, v.Code = packet.ErrProtocol, packet.ProtocolError
	return v
}
