package packet_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqtt/packettest"
)

// encodeVersion is the version a valid vector's packet is encoded with.
func encodeVersion(v packettest.Vector) packet.Version {
	if c, ok := v.Packet.(*packet.Connect); ok {
		return c.Version
	}
	return v.Version
}

func checkErr(t *testing.T, v packettest.Vector, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("decoded, want error %v", v.Err)
	}
	if !errors.Is(err, v.Err) {
		t.Fatalf("error %v, want one wrapping %v", err, v.Err)
	}
	if got := packet.CodeOf(err); got != v.Code {
		t.Fatalf("error %v has code %v, want %v", err, got, v.Code)
	}
}

func TestDecodeVectors(t *testing.T) {
	for _, v := range packettest.All() {
		t.Run(v.Name, func(t *testing.T) {
			b := v.Bytes()
			p, n, err := packet.Decode(b, v.Version)
			if !v.Valid() {
				checkErr(t, v, err)
				if p != nil || n != 0 {
					t.Fatalf("failed decode returned %v, %d", p, n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if n != len(b) {
				t.Fatalf("Decode used %d of %d bytes", n, len(b))
			}
			if !reflect.DeepEqual(p, v.Packet) {
				t.Fatalf("decoded\n  %#v\nwant\n  %#v", p, v.Packet)
			}
			if _, ok := p.(*packet.Connect); ok {
				// A CONNECT decodes the same before a version is known.
				p0, _, err := packet.Decode(b, 0)
				if err != nil || !reflect.DeepEqual(p0, v.Packet) {
					t.Fatalf("Decode before CONNECT: %v, %v", p0, err)
				}
			}
			// Trailing bytes after the packet are not consumed.
			p2, n2, err := packet.Decode(append(bytes.Clone(b), 0xc0, 0x00), v.Version)
			if err != nil || n2 != len(b) || !reflect.DeepEqual(p2, v.Packet) {
				t.Fatalf("Decode with a following packet: %v, %d, %v", p2, n2, err)
			}
		})
	}
}

func TestReaderVectors(t *testing.T) {
	for _, v := range packettest.All() {
		t.Run(v.Name, func(t *testing.T) {
			r := packet.NewReader(bytes.NewReader(v.Bytes()), 0)
			if _, ok := v.Packet.(*packet.Connect); !ok {
				r.SetVersion(v.Version)
			}
			p, err := r.Next()
			if !v.Valid() {
				checkErr(t, v, err)
				if _, err2 := r.Next(); err2 != err {
					t.Fatalf("error not sticky: then %v", err2)
				}
				return
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if !reflect.DeepEqual(p, v.Packet) {
				t.Fatalf("read\n  %#v\nwant\n  %#v", p, v.Packet)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("after the packet: %v, want io.EOF", err)
			}
		})
	}
}

func TestEncodeVectors(t *testing.T) {
	for _, v := range packettest.Valid() {
		t.Run(v.Name, func(t *testing.T) {
			ver := encodeVersion(v)
			got, err := v.Packet.Append(nil, ver)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if v.NonCanonical {
				p, _, err := packet.Decode(got, ver)
				if err != nil || !reflect.DeepEqual(p, v.Packet) {
					t.Fatalf("re-decoded %v, %v", p, err)
				}
				if bytes.Equal(got, v.Bytes()) {
					t.Fatalf("vector marked non-canonical but Append produced it")
				}
				return
			}
			if want := v.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("Append\n  got  % x\n  want % x", got, want)
			}
			// Appending to a prefix keeps the prefix and allocates nothing
			// when there is room.
			buf := make([]byte, 3, 3+len(got))
			copy(buf, "abc")
			out, _ := v.Packet.Append(buf, ver)
			if string(out[:3]) != "abc" || !bytes.Equal(out[3:], got) {
				t.Fatalf("Append to a prefix: % x", out)
			}
			allocs := testing.AllocsPerRun(10, func() { _, _ = v.Packet.Append(buf[:0], ver) })
			if allocs != 0 {
				t.Fatalf("Append with capacity: %v allocations", allocs)
			}
		})
	}
}

// TestDescribeVectors checks that every vector's packet has a one-line
// description naming its type.
func TestDescribeVectors(t *testing.T) {
	for _, v := range packettest.Valid() {
		d := packet.Describe(v.Packet)
		if !bytes.HasPrefix([]byte(d), []byte(v.Packet.Type().String())) || bytes.ContainsAny([]byte(d), "\n") {
			t.Errorf("%s: Describe = %q", v.Name, d)
		}
	}
}
