package packet

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestVBI(t *testing.T) {
	for _, v := range []int{0, 1, 127, 128, 16383, 16384, 2097151, 2097152, MaxRemainingLength} {
		b := appendVBI(nil, v)
		if len(b) != vbiLen(v) {
			t.Errorf("%d: %d bytes, vbiLen %d", v, len(b), vbiLen(v))
		}
		got, n, err := readVBI(b)
		if err != nil || int(got) != v || n != len(b) {
			t.Errorf("%d: read %d, %d, %v", v, got, n, err)
		}
	}
	bad := []struct {
		b   []byte
		err error
	}{
		{nil, errShortVBI},
		{[]byte{0x80}, errShortVBI},
		{[]byte{0xff, 0xff, 0xff}, errShortVBI},
		{[]byte{0xff, 0xff, 0xff, 0xff}, errLongVBI},
		{[]byte{0x80, 0x00}, errNonMinimal},
		{[]byte{0xff, 0x80, 0x00}, errNonMinimal},
		{[]byte{0x80, 0x80, 0x80, 0x00}, errNonMinimal},
	}
	for _, c := range bad {
		if _, _, err := readVBI(c.b); err != c.err {
			t.Errorf("% x: %v, want %v", c.b, err, c.err)
		}
	}
}

func TestCheckUTF8(t *testing.T) {
	good := []string{"", "a/b", "ü/€/𝄞", "\ufeff", "\x01\x7f", "\uFFFF", "a\u0085"}
	for _, s := range good {
		if err := checkUTF8([]byte(s), "x"); err != nil {
			t.Errorf("%q: %v", s, err)
		}
		if !validUTF8String(s) {
			t.Errorf("%q: validUTF8String false", s)
		}
	}
	bad := []string{"\x00", "a\x00", "é\x00", "\xff", "a\xc3", "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\xaf",
		"\xe0\x80\xaf", "\xf4\x90\x80\x80", "ü\x80"}
	for _, s := range bad {
		if err := checkUTF8([]byte(s), "x"); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v", s, err)
		}
		if validUTF8String(s) {
			t.Errorf("%q: validUTF8String true", s)
		}
	}
}

func TestCheckTopic(t *testing.T) {
	for s, want := range map[string]error{
		"a/b": nil, "ü/b": nil, "": nil, "a/+": ErrProtocol, "#": ErrProtocol, "ü/#": ErrProtocol,
		"a\x00": ErrMalformed, "+\xff": ErrMalformed, "\xff+": ErrMalformed, "é+\x00": ErrMalformed,
	} {
		if err := checkTopic([]byte(s), "t"); !errors.Is(err, want) || (err == nil) != (want == nil) {
			t.Errorf("%q: %v, want %v", s, err, want)
		}
	}
}

func TestHasDiscouragedRunes(t *testing.T) {
	for s, want := range map[string]bool{
		"a/b": false, "ü€": false, "\x01": true, "a\x1f": true, "\x7f": true, "\u0085": true, "\u009f": true,
		"\u00a0": false, "\ufdd0": true, "\ufdef": true, "\ufffe": true, "\U0001FFFF": true, "\U0010FFFE": true,
	} {
		if got := HasDiscouragedRunes(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}

func TestCodeOf(t *testing.T) {
	cases := []struct {
		err  error
		want ReasonCode
	}{
		{malformed("x"), MalformedPacket},
		{protocolErr("x"), ProtocolError},
		{fmt.Errorf("wrapped: %w", protocolErr("x")), ProtocolError},
		{fmt.Errorf("bare: %w", ErrTooLarge), PacketTooLarge},
		{io.ErrUnexpectedEOF, UnspecifiedError},
		{checkLength("PUBLISH", MaxRemainingLength+1), PacketTooLarge},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if checkLength("x", MaxRemainingLength) != nil {
		t.Error("checkLength rejects the maximum")
	}
}

func TestPropTables(t *testing.T) {
	known := 0
	for id := PropID(0); id < 64; id++ {
		if !id.Known() {
			if kindOf(id) != 0 {
				t.Errorf("%v: unknown but has a kind", id)
			}
			continue
		}
		known++
		if kindOf(id) == 0 || propName(id) == "unknown" {
			t.Errorf("%v: no kind or name", id)
		}
		var p Properties
		switch kindOf(id) {
		case kByte:
			if p.byteField(id) == nil {
				t.Errorf("%v: no byte field", id)
			}
		case kU16:
			if p.u16Field(id) == nil {
				t.Errorf("%v: no u16 field", id)
			}
		case kU32:
			if p.u32Field(id) == nil {
				t.Errorf("%v: no u32 field", id)
			}
		case kString:
			if p.stringField(id) == nil {
				t.Errorf("%v: no string field", id)
			}
		case kBinary:
			if p.binaryField(id) == nil {
				t.Errorf("%v: no binary field", id)
			}
		}
	}
	if known != 27 {
		t.Errorf("%d known properties, MQTT 5 defines 27", known)
	}
}

// TestReasonTables spot-checks the per-packet reason code tables against
// the specification's tables.
func TestReasonTables(t *testing.T) {
	count := func(ty Type) int {
		n := 0
		for c := 0; c < 256; c++ {
			if reasonAllowed(ty, ReasonCode(c)) {
				n++
				if !ReasonCode(c).Known() {
					t.Errorf("%v allows unknown code 0x%02x", ty, c)
				}
			}
		}
		return n
	}
	// Sizes of MQTT 5 Tables in §3.2.2.2, 3.4.2.1, 3.5.2.1, 3.6.2.1,
	// 3.7.2.1, 3.9.3, 3.11.3, 3.14.2.1, 3.15.2.1.
	want := map[Type]int{CONNACK: 22, PUBACK: 9, PUBREC: 9, PUBREL: 2, PUBCOMP: 2, SUBACK: 12, UNSUBACK: 7,
		DISCONNECT: 29, AUTH: 3, CONNECT: 0, PUBLISH: 0, PINGREQ: 0}
	for ty, n := range want {
		if got := count(ty); got != n {
			t.Errorf("%v: %d reason codes, want %d", ty, got, n)
		}
	}
}
