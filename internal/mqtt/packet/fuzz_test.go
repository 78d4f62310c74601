package packet_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	. "github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqtt/packettest"
)

// Fuzz inputs start with a byte choosing the decoder's version.
var fuzzVersions = [4]Version{0, V311, V5, V31}

func versionByte(v Version) byte {
	for i, fv := range fuzzVersions {
		if fv == v {
			return byte(i)
		}
	}
	return 0
}

func addVectorSeeds(f *testing.F) {
	for _, v := range packettest.All() {
		f.Add(append([]byte{versionByte(v.Version)}, v.Bytes()...))
	}
}

// checkCodecError checks that a decode error is one the codec promises.
func checkCodecError(t *testing.T, err error) {
	t.Helper()
	if err == io.ErrUnexpectedEOF {
		return
	}
	if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrTooLarge) &&
		!errors.Is(err, ErrUnsupportedVersion) && !errors.Is(err, ErrTopicAlias) {
		t.Fatalf("error %v wraps no codec sentinel", err)
	}
	if c := CodeOf(err); !ReasonAllowed(DISCONNECT, c) && c != UnsupportedProtocolVersion {
		t.Fatalf("error %v carries code %v, which a server cannot send", err, c)
	}
}

func FuzzDecode(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v, b := fuzzVersions[data[0]%4], data[1:]
		p, n, err := Decode(b, v)
		if err != nil {
			if p != nil || n != 0 {
				t.Fatalf("error %v with packet %v, %d bytes", err, p, n)
			}
			checkCodecError(t, err)
			return
		}
		if n < 2 || n > len(b) {
			t.Fatalf("decoded %d of %d bytes", n, len(b))
		}
		if d := Describe(p); len(d) == 0 || bytes.IndexByte([]byte(d), '\n') >= 0 {
			t.Fatalf("Describe = %q", d)
		}
	})
}

// FuzzRoundTrip checks that whatever decodes encodes, that the encoding
// decodes to an equal value, and that encoding is then a fixed point.
func FuzzRoundTrip(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v, b := fuzzVersions[data[0]%4], data[1:]
		p, _, err := Decode(b, v)
		if err != nil {
			return
		}
		if c, ok := p.(*Connect); ok {
			v = c.Version
		}
		enc, err := p.Append(nil, v)
		if err != nil {
			t.Fatalf("decoded %v but Append fails: %v", p, err)
		}
		q, n, err := Decode(enc, v)
		if err != nil || n != len(enc) {
			t.Fatalf("re-decode of % x: %v (%d of %d bytes)", enc, err, n, len(enc))
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the packet:\n  %#v\n  %#v", p, q)
		}
		enc2, err := q.Append(nil, v)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: % x then % x (%v)", enc, enc2, err)
		}
	})
}

// FuzzReader feeds a stream through a Reader with a small maximum size, in
// chunks, and checks it against Decode applied packet by packet.
// data[0] chooses the version, data[1] the chunk size and maximum.
func FuzzReader(f *testing.F) {
	for _, v := range packettest.All() {
		f.Add(append([]byte{versionByte(v.Version), 0x13}, v.Bytes()...))
	}
	byVersion := map[Version][]byte{}
	for _, v := range packettest.Valid() {
		if _, ok := v.Packet.(*Connect); ok {
			continue
		}
		byVersion[v.Version] = append(byVersion[v.Version], v.Bytes()...)
	}
	for v, b := range byVersion {
		f.Add(append([]byte{versionByte(v), 0x07}, b...))
		f.Add(append([]byte{versionByte(v), 0xff}, b...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		v := fuzzVersions[data[0]%4]
		chunk := int(data[1]&0x3f) + 1
		maxSize := uint32(data[1]>>6)*64 + 32
		stream := data[2:]
		r := NewReader(&chunkReader{data: stream, chunk: chunk}, maxSize)
		r.SetVersion(v)
		off := 0
		for i := 0; ; i++ {
			got, gotErr := r.Next()
			want, n, wantErr := Decode(stream[off:], v)
			switch {
			case off == len(stream):
				wantErr = io.EOF
			case v == 0 && stream[off]>>4 != byte(CONNECT):
				// Refused from the first byte, by both.
			case tooLarge(stream[off:], maxSize):
				want, wantErr = nil, ErrTooLarge
			}
			if wantErr != nil {
				if gotErr == nil || errors.Is(wantErr, ErrTooLarge) && !errors.Is(gotErr, ErrTooLarge) ||
					!errors.Is(wantErr, ErrTooLarge) && gotErr.Error() != wantErr.Error() {
					t.Fatalf("packet %d: Reader gave %v, %v; Decode %v", i, got, gotErr, wantErr)
				}
				if gotErr != io.EOF && gotErr != io.ErrUnexpectedEOF {
					checkCodecError(t, gotErr)
				}
				return
			}
			if gotErr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("packet %d: Reader gave %v, %v; Decode %v", i, got, gotErr, want)
			}
			if c, ok := want.(*Connect); ok && v == 0 {
				v = c.Version
			}
			off += n
		}
	})
}

// tooLarge reports whether b starts with a complete fixed header announcing
// a packet over max bytes.
func tooLarge(b []byte, max uint32) bool {
	if len(b) < 2 {
		return false
	}
	rl, shift, i := 0, 0, 1
	for ; i < len(b) && i <= 4; i++ {
		rl |= int(b[i]&0x7f) << shift
		shift += 7
		if b[i]&0x80 == 0 {
			minimal := i == 1 || b[i] != 0
			return minimal && 1+i+rl > int(max)
		}
	}
	return false
}

type chunkReader struct {
	data  []byte
	chunk int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.data[:min(len(c.data), c.chunk)])
	c.data = c.data[n:]
	return n, nil
}
