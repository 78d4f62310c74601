package topiclog

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// Benchmarks run on the operating system's filesystem under b.TempDir, so
// the fsync figures are those of the machine's disk. Reads are from the
// page cache (the files were just written); nothing here drops caches.

var benchPayload = make([]byte, 128)

func benchEntries(n int, topics int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Topic: fmt.Sprintf("sensors/%d/temp", i%topics), Payload: benchPayload, Time: epoch.Add(time.Duration(i) * time.Millisecond), Mark: uint64(i)}
	}
	return es
}

// BenchmarkAppend appends batches of 1, 64 and 512 records of 128 bytes,
// with an fsync per batch and without.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []SyncPolicy{SyncAlways, SyncNone} {
		for _, batch := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("sync=%v/batch=%d", sync, batch), func(b *testing.B) {
				l, err := Open(OSFS{}, b.TempDir(), Options{Sync: sync})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				es := benchEntries(batch, 4)
				b.SetBytes(int64(batch * len(benchPayload)))
				b.ResetTimer()
				for b.Loop() {
					if _, err := l.AppendBatch(es); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// benchLog writes n records of topics topics (payload bytes each) to a
// fresh directory, closes the log and returns the directory.
func benchLog(b *testing.B, n, topics, payload int) string {
	b.Helper()
	dir := b.TempDir()
	l, err := Open(OSFS{}, dir, Options{Sync: SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	es := benchEntries(1000, topics)
	p := make([]byte, payload)
	for i := range es {
		es[i].Payload = p
	}
	for i := 0; i < n; i += len(es) {
		if _, err := l.AppendBatch(es[:min(len(es), n-i)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkGet reads random records by (topic, index) from a log of 100k
// records of 4 topics.
func BenchmarkGet(b *testing.B) {
	dir := benchLog(b, 100_000, 4, 128)
	l, err := Open(OSFS{}, dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		topic := fmt.Sprintf("sensors/%d/temp", rng.IntN(4))
		if _, err := l.Get(topic, 1+uint64(rng.IntN(25_000))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay reads a whole log of 200k records of 256 bytes in order
// by position, 1000 records a call: a subscriber replaying history or a
// cursor catching up. SetBytes counts the log's file bytes.
func BenchmarkReplay(b *testing.B) {
	dir := benchLog(b, 200_000, 4, 256)
	l, err := Open(OSFS{}, dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetBytes(l.Stats().Bytes)
	b.ResetTimer()
	for b.Loop() {
		for from := uint64(1); from < l.NextSeq(); {
			recs, err := l.ReadSeq(from, 1000, 0)
			if err != nil || len(recs) == 0 {
				b.Fatal(err)
			}
			from += uint64(len(recs))
		}
	}
	b.ReportMetric(float64(b.N)*200_000/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkOpen recovers a log of 1M records of 16 bytes: it reads and
// verifies every record and rebuilds the index. It reports the heap the
// open log holds per record (the index), with 1 and with 1000 topics.
func BenchmarkOpen(b *testing.B) {
	const n = 1_000_000
	for _, topics := range []int{1, 1000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			dir := benchLog(b, n, topics, 16)
			var perRecord float64
			b.ResetTimer()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				l, err := Open(OSFS{}, dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perRecord = float64(after.HeapAlloc-before.HeapAlloc) / n
				if l.NextSeq() != n+1 {
					b.Fatalf("recovered %d records", l.NextSeq()-1)
				}
				l.Close()
			}
			b.ReportMetric(perRecord, "heap-B/record")
			b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "records/s")
		})
	}
}
