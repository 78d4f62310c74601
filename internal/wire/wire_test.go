package wire

import (
	"errors"
	"testing"
)

func TestRoundTripAndStickyFailure(t *testing.T) {
	var b []byte
	b = AppendString(b, "topic")
	b = AppendBytes(b, []byte{1, 2, 3})
	b = AppendStrings(b, []string{"a", "", "c"})
	b = append(b, 7)
	d := NewDecoder(b)
	if d.Str() != "topic" || string(d.BytesCopy()) != "\x01\x02\x03" {
		t.Fatal("string/bytes round trip")
	}
	ss := d.Strings()
	if len(ss) != 3 || ss[0] != "a" || ss[1] != "" || ss[2] != "c" {
		t.Fatalf("strings: %q", ss)
	}
	if d.Byte() != 7 || d.Finish() != nil {
		t.Fatal("byte or finish")
	}
	if d.Byte() != 0 || !errors.Is(d.Finish(), ErrTruncated) {
		t.Fatal("reading past the end must fail and stick")
	}

	short := NewDecoder(AppendString(nil, "hello")[:3])
	if short.Str() != "" || !errors.Is(short.Finish(), ErrTruncated) {
		t.Fatal("truncated string accepted")
	}
	trailing := NewDecoder([]byte{0, 9})
	_ = trailing.Bytes()
	if !errors.Is(trailing.Finish(), ErrTrailing) {
		t.Fatal("trailing byte not reported")
	}
	huge := NewDecoder([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	if huge.Count(1) != 0 || !huge.Failed() {
		t.Fatal("a count larger than the input must fail")
	}
	big := NewDecoder([]byte{0x80, 0x80, 0x80, 0x80, 0x10})
	if big.Uint32() != 0 || !big.Failed() {
		t.Fatal("a value over 32 bits must fail")
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add(AppendStrings(AppendBytes(AppendString(nil, "x"), []byte{1}), []string{"a"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		_ = d.Str()
		_ = d.Strings()
		_ = d.Uint32()
		_ = d.Varint()
		_ = d.Rest()
		_ = d.Finish()
	})
}
