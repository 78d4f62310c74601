package bench

import (
	"bytes"
	"testing"
)

// FuzzParseStamp checks that the payload parsers never panic, and that a
// text stamp they accept renders back to the same prefix.
func FuzzParseStamp(f *testing.F) {
	f.Add([]byte("sx-ts=1700000000000000005;hello"))
	f.Add([]byte("SX\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x03pad"))
	f.Add([]byte("sx-ts=-1;"))
	f.Add([]byte("sx-ts=;"))
	f.Fuzz(func(t *testing.T, p []byte) {
		if h, ok := ParseHeader(p); ok {
			b := make([]byte, HeaderSize)
			PutHeader(b, h)
			if !bytes.Equal(b, p[:HeaderSize]) {
				t.Fatalf("header %x re-encodes as %x", p[:HeaderSize], b)
			}
			return
		}
		sent, rest, ok := ParseStamp(p)
		if !ok {
			if !bytes.Equal(rest, p) {
				t.Fatal("a rejected payload must be returned whole")
			}
			return
		}
		again, rest2, ok := ParseStamp(append(AppendStamp(nil, sent), rest...))
		if !ok || !again.Equal(sent) || !bytes.Equal(rest2, rest) {
			t.Fatalf("stamp %q does not round-trip", p)
		}
	})
}
