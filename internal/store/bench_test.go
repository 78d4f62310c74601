package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/message"
)

// counter is an Observer that counts transactions and the batches in them.
type counter struct{ txs, batches, syncs atomic.Int64 }

var _ Observer = (*counter)(nil)

func (c *counter) ObserveCommit(i CommitInfo) { c.txs.Add(1); c.batches.Add(int64(i.Batches)) }
func (c *counter) ObserveSync(time.Duration)  { c.syncs.Add(1) }

// BenchmarkCommit measures group commit: N goroutines each commit 1-message
// batches (64-byte payload) and wait for done. It reports committed batches
// per second and the mean number of batches per transaction.
func BenchmarkCommit(b *testing.B) {
	for _, mode := range []FsyncMode{FsyncAlways, FsyncBatch, FsyncNever} {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("fsync=%v/writers=%d", mode, writers), func(b *testing.B) {
				benchCommit(b, mode, writers, false)
			})
		}
	}
}

// BenchmarkCommitCursor is a persistent session's delivery of a sequenced
// record as the session writes it: the queued copy alone (cursor=false,
// the write before cursors were stored with it) or with the session's
// cursor on the group in the same batch (cursor=true).
func BenchmarkCommitCursor(b *testing.B) {
	for _, mode := range []FsyncMode{FsyncAlways, FsyncNever} {
		for _, cursor := range []bool{false, true} {
			b.Run(fmt.Sprintf("fsync=%v/writers=8/cursor=%v", mode, cursor), func(b *testing.B) {
				benchCommit(b, mode, 8, cursor)
			})
		}
	}
}

func benchCommit(b *testing.B, mode FsyncMode, writers int, cursor bool) {
	obs := &counter{}
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{Fsync: mode, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	}()
	payload := make([]byte, 64)
	var (
		issued atomic.Int64
		wg     sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := fmt.Sprint("client-", w)
			var batch Batch
			for seq := uint64(1); issued.Add(1) <= int64(b.N); seq++ {
				batch.Reset() // done has run: the batch is ours again
				batch.PutMessage(client, &QueuedMessage{Seq: seq, QoS: 1,
					Msg: &message.Message{Topic: "bench/topic", Payload: payload, QoS: 1, Publisher: client}})
				if cursor {
					batch.PutCursor(client, "bench/group", seq)
				}
				if err := s.CommitWait(context.Background(), &batch); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
	if txs := obs.txs.Load(); txs > 0 {
		b.ReportMetric(float64(obs.batches.Load())/float64(txs), "batches/tx")
	}
}
