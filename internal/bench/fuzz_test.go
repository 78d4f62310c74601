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

// FuzzParseProc checks that the /proc parsers never panic and never return
// negative figures.
func FuzzParseProc(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9 10 11\n"))
	f.Add([]byte("Name:\tx\nVmRSS:\t  12 kB\n"))
	f.Add([]byte("9 ((a) b)) R 1 2 3 4 5 6 7 8 9 10 11 12"))
	f.Add([]byte("cpu  10 0 5 100 3 0 1 2 0 0\ncpu0 5 0 2 50 1 0 0 1 0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if cpu, err := ParseStatCPU(b); err == nil && cpu < 0 {
			t.Fatalf("negative CPU %v", cpu)
		}
		if rss, err := ParseStatusRSS(b); err == nil && rss < 0 {
			t.Fatalf("negative RSS %d", rss)
		}
		if s, err := ParseSystemCPU(b); err == nil && (s.Busy < 0 || s.Busy > s.Total) {
			t.Fatalf("system CPU %+v", s)
		}
	})
}
