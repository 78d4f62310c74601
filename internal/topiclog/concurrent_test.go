package topiclog

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// concPayload names a record's topic, index and place in its batch, so a
// reader can check what it reads without sharing state with the writer.
func concPayload(topic string, index uint64, k, n int) []byte {
	return fmt.Appendf(nil, "%s|%d|%d|%d|%s", topic, index, k, n, bytes.Repeat([]byte{'p'}, int(index%97)))
}

func parseConcPayload(p []byte) (topic string, index uint64, k, n int, err error) {
	var pad string
	_, err = fmt.Sscanf(string(bytes.ReplaceAll(p, []byte{'|'}, []byte{' '})), "%s %d %d %d %s", &topic, &index, &k, &n, &pad)
	if err != nil && index%97 == 0 {
		err = nil // no padding
	}
	return
}

// TestConcurrentReaders runs one writer (appends, retention, a snapshot
// restored in place) against readers that check every record they see and
// that they never see part of a batch or a bound move backwards. Run it
// with -race.
func TestConcurrentReaders(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var fsys FS = NewMemFS()
			dir, segBytes := "g", int64(8<<10)
			if fsName == "os" {
				// Larger segments: each roll costs two fsyncs.
				fsys, dir, segBytes = OSFS{}, t.TempDir(), 32<<10
			}
			l, err := Open(fsys, dir, Options{SegmentBytes: segBytes, Sync: SyncNone})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			rng := newRand(t, seeds(42)[0])
			var done atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for r := range 4 {
				wg.Go(func() {
					if err := concReader(l, r, &done); err != nil {
						errs <- err
					}
				})
			}
			next := map[string]uint64{}
			for b := range 1500 {
				n := 1 + rng.IntN(10)
				batch := make([]Entry, n)
				for k := range batch {
					topic := fmt.Sprint("t/", rng.IntN(4))
					next[topic]++
					batch[k] = Entry{Topic: topic, Payload: concPayload(topic, next[topic], k, n), Time: epoch.Add(time.Duration(b) * time.Second), Retain: k == 0}
				}
				if _, err := l.AppendBatch(batch); err != nil {
					t.Fatal(err)
				}
				switch {
				case b%50 == 49:
					if _, err := l.ApplyRetention(Retention{MaxRecordsPerTopic: 300}, epoch); err != nil {
						t.Fatal(err)
					}
				case b%300 == 299:
					restoreInPlace(t, l)
				}
			}
			done.Store(true)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func restoreInPlace(t *testing.T, l *Log) {
	t.Helper()
	s, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if err := l.Restore(&buf); err != nil {
		t.Fatal(err)
	}
}

func checkConcRecord(r Record) error {
	topic, index, _, _, err := parseConcPayload(r.Payload)
	if err != nil || topic != r.Topic || index != r.Index {
		return fmt.Errorf("record %s does not match its payload (%v)", describe(r), err)
	}
	return nil
}

func concReader(l *Log, id int, done *atomic.Bool) error {
	seen := map[string][2]uint64{} // topic -> first, last seen in Bounds
	for i := 0; !done.Load() || i < 10; i++ {
		from := l.NextSeq()
		if from > 40 {
			from -= 40
		}
		recs, err := l.ReadSeq(from, 1000, 0)
		if err != nil {
			if _, ok := compactedFirst(err); ok {
				continue // retention overtook us
			}
			return fmt.Errorf("reader %d: ReadSeq(%d): %w", id, from, err)
		}
		for j, r := range recs {
			if err := checkConcRecord(r); err != nil {
				return err
			}
			if r.Seq != from+uint64(j) {
				return fmt.Errorf("reader %d: ReadSeq(%d) record %d has position %d", id, from, j, r.Seq)
			}
		}
		if len(recs) > 0 {
			_, _, k, n, _ := parseConcPayload(recs[len(recs)-1].Payload)
			if k != n-1 {
				return fmt.Errorf("reader %d: read ended inside a batch (record %d of %d)", id, k+1, n)
			}
		}
		topic := fmt.Sprint("t/", i%4)
		first, last, ok := l.Bounds(topic)
		if !ok {
			continue
		}
		if prev := seen[topic]; first < prev[0] || last < prev[1] {
			return fmt.Errorf("reader %d: bounds of %s went from %v to [%d %d]", id, topic, prev, first, last)
		}
		seen[topic] = [2]uint64{first, last}
		if first <= last {
			idx := first + uint64(i)%(last-first+1)
			r, err := l.Get(topic, idx)
			if _, ok := compactedFirst(err); ok {
				continue
			}
			if err != nil {
				return fmt.Errorf("reader %d: Get(%s, %d): %w", id, topic, idx, err)
			}
			if err := checkConcRecord(r); err != nil {
				return err
			}
		}
		r, err := l.LatestRetained(topic)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reader %d: LatestRetained(%s): %w", id, topic, err)
		}
		if _, _, k, _, _ := parseConcPayload(r.Payload); !r.Retain || k != 0 {
			return fmt.Errorf("reader %d: LatestRetained(%s) = %s", id, topic, describe(r))
		}
	}
	return nil
}
