// Package wire owns the primitives of Sextant's own binary encodings (stored
// messages and session records, peer-link frames, cluster request bodies):
// uvarint-length-prefixed strings and byte strings, and a Decoder whose
// first error sticks so a decoder can read a whole record and check once.
// It knows nothing of what the records mean; each package wraps failures in
// its own sentinel error. Pure: no I/O, no state beyond a Decoder's input.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sentinel errors of Decoder.Finish.
var (
	ErrTruncated = errors.New("wire: truncated or out of range")
	ErrTrailing  = errors.New("wire: trailing bytes")
)

// AppendString appends s with its uvarint length.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBytes appends b with its uvarint length.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendStrings appends a uvarint count and each string.
func AppendStrings(dst []byte, ss []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = AppendString(dst, s)
	}
	return dst
}

// Decoder reads primitives from a byte slice. After the first failure every
// read returns a zero value; Finish reports it.
type Decoder struct {
	b      []byte
	failed bool
}

// NewDecoder reads b (which results may alias: see Bytes).
func NewDecoder(b []byte) Decoder { return Decoder{b: b} }

// Fail marks the input invalid (a caller's own check failed); nothing more
// is read from it.
func (d *Decoder) Fail() { d.failed, d.b = true, nil }

// Failed reports whether a read or a check failed.
func (d *Decoder) Failed() bool { return d.failed }

// Len is the number of unread bytes.
func (d *Decoder) Len() int { return len(d.b) }

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.failed || len(d.b) == 0 {
		d.Fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	// Most lengths, counts and ids fit one byte: read those without the
	// general loop. A failed decoder has no input left, so this never
	// reads past a failure.
	if b := d.b; len(b) > 0 && b[0] < 0x80 {
		d.b = b[1:]
		return uint64(b[0])
	}
	return d.uvarint()
}

func (d *Decoder) uvarint() uint64 {
	if d.failed {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.failed {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Uint32 reads an unsigned varint that must fit 32 bits.
func (d *Decoder) Uint32() uint32 {
	v := d.Uvarint()
	if v > 0xFFFFFFFF {
		d.Fail()
		return 0
	}
	return uint32(v)
}

// Count reads an element count whose elements take at least each bytes, so
// a corrupt count cannot make the caller allocate beyond the input's size.
func (d *Decoder) Count(each int) int {
	n := d.Uvarint()
	if d.failed || n > uint64(len(d.b)/max(each, 1)) {
		d.Fail()
		return 0
	}
	return int(n)
}

// Bytes reads a length-prefixed byte string; the result aliases the input.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.failed || n > uint64(len(d.b)) {
		d.Fail()
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

// BytesCopy reads a length-prefixed byte string into a new slice (nil when
// empty).
func (d *Decoder) BytesCopy() []byte {
	b := d.Bytes()
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// Str reads a length-prefixed string.
func (d *Decoder) Str() string { return string(d.Bytes()) }

// Strings reads a count and that many strings.
func (d *Decoder) Strings() []string {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := 0; i < n && !d.failed; i++ {
		out = append(out, d.Str())
	}
	return out
}

// Rest returns every unread byte (aliasing the input).
func (d *Decoder) Rest() []byte {
	if d.failed {
		return nil
	}
	out := d.b
	d.b = nil
	return out
}

// Finish reports a failed read or unread trailing bytes.
func (d *Decoder) Finish() error {
	if d.failed {
		return ErrTruncated
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d", ErrTrailing, len(d.b))
	}
	return nil
}
