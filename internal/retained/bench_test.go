package retained

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/sextantmq/sextant/internal/message"
)

// benchStore holds 100,000 retained topics "<l1>/<l2>/<l3>": 10 first
// levels, 1,000 second levels, 10 third levels. "a/+/c" matches 1,000 of
// them, "#" all.
func benchStore(b *testing.B) *Index {
	b.Helper()
	var s Index
	l1 := []string{"a", "b", "d", "e", "f", "g", "h", "i", "j", "k"}
	l3 := []string{"c", "x", "y", "z", "status", "temp", "hum", "co2", "lux", "volt"}
	for _, x := range l1 {
		for y := range 1000 {
			for _, z := range l3 {
				s.Set(&message.Message{Topic: x + "/" + strconv.Itoa(y) + "/" + z, Payload: []byte("v"), Retain: true})
			}
		}
	}
	if s.Len() != 100_000 {
		b.Fatalf("Len = %d", s.Len())
	}
	return &s
}

func benchMatch(b *testing.B, filter string, want int) {
	s := benchStore(b)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		n = 0
		s.Match(filter, func(*message.Message) bool { n++; return true })
	}
	if n != want {
		b.Fatalf("Match(%q) found %d, want %d", filter, n, want)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(want), "ns/msg")
}

func BenchmarkMatchPlus100k(b *testing.B) { benchMatch(b, "a/+/c", 1000) }
func BenchmarkMatchHash100k(b *testing.B) { benchMatch(b, "#", 100_000) }
func BenchmarkGet100k(b *testing.B) {
	s := benchStore(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if s.Get("e/"+strconv.Itoa(i%1000)+"/temp") == nil {
			b.Fatal("missing")
		}
	}
}

func BenchmarkMemoryPerRetained(b *testing.B) {
	var before, after runtime.MemStats
	var s *Index
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		s = benchStore(b)
		runtime.GC()
		runtime.ReadMemStats(&after)
	}
	// Includes the messages themselves (about 130 bytes each here).
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(s.Len()), "bytes/msg")
	runtime.KeepAlive(s)
}
