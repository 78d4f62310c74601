package sequencer

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// DefaultRecentBytes bounds the records a sequencer keeps in memory for
// reads near its log's end (Options.RecentBytes). A live feed polls a few
// batches behind the end; a node may hold hundreds of groups, but only the
// groups being written fill theirs.
const DefaultRecentBytes = 1 << 20

// recent holds the records the sequencer appended most recently, decoded,
// so that a read near the log's end (a live feed's poll) is answered
// without reading the segment files and decoding them. It holds a
// contiguous run of positions ending at the log's end, whole batches,
// oldest dropped first once over its limit.
//
// Apply fills it after each append, and only then wakes readers; Restore
// and Close empty it before they replace or close the log; retention
// trims it after removing the prefix, and a read checks the log's first
// position after reading it, so no record the log no longer holds is
// served. A record at a position never changes (the log holds committed
// records only, the same on every replica), so one kept here is the log's.
type recent struct {
	limit int // bytes; 0: keep nothing

	mu      sync.RWMutex
	batches []recentBatch // oldest first, contiguous
	bytes   int

	hits, misses atomic.Uint64
	// reads counts ReadSeq calls; a replica nobody reads from (a follower
	// while the home serves the feeds) stops keeping records after
	// recentIdleBatches batches without one, and starts again at the
	// next read. idle and lastReads belong to the apply goroutine.
	reads     atomic.Uint64
	lastReads uint64
	idle      int
}

// recentIdleBatches is how many batches a sequencer keeps without being
// read before it stops keeping any.
const recentIdleBatches = 64

type recentBatch struct {
	first uint64
	recs  []Record
	sizes []int32 // each record's size in the log, for read limits
	bytes int     // memory held, for the limit
}

// recentOverhead is a record's memory beyond its message and topic: the
// Record and its size.
const recentOverhead = 128

func (c *recent) next() uint64 {
	b := &c.batches[len(c.batches)-1]
	return b.first + uint64(len(b.recs))
}

// add keeps a batch just appended at positions from first on. buf holds
// the records' messages and is kept as is.
func (c *recent) add(first uint64, recs []Record, sizes []int32, buf []byte) {
	n := cap(buf)
	for i := range recs {
		n += recentOverhead + len(recs[i].Topic)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.batches) > 0 && c.next() != first {
		c.clearLocked() // not contiguous (never expected): start again
	}
	c.batches = append(c.batches, recentBatch{first: first, recs: recs, sizes: sizes, bytes: n})
	c.bytes += n
	drop := 0
	for c.bytes > c.limit && drop < len(c.batches) {
		c.bytes -= c.batches[drop].bytes
		drop++
	}
	c.dropLocked(drop)
}

// dropLocked drops the oldest k batches.
func (c *recent) dropLocked(k int) {
	if k == 0 {
		return
	}
	n := copy(c.batches, c.batches[k:])
	clear(c.batches[n:])
	c.batches = c.batches[:n]
}

// trim drops the batches that start below first (retention removed a
// prefix of the log; a batch partly below is dropped whole).
func (c *recent) trim(first uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for k < len(c.batches) && c.batches[k].first < first {
		c.bytes -= c.batches[k].bytes
		k++
	}
	c.dropLocked(k)
}

func (c *recent) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
}

func (c *recent) clearLocked() {
	clear(c.batches)
	c.batches, c.bytes = c.batches[:0], 0
}

// read returns the records from position from on, shared with memory and
// with other reads (not to be modified), with the log's limits
// (topiclog.Log.ReadSeq: at most maxRecords, at most maxBytes of encoded
// records if positive, at least one), if it holds from; ok is false if it
// does not.
func (c *recent) read(from uint64, maxRecords, maxBytes int) (out []Record, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.batches) == 0 || from < c.batches[0].first || from >= c.next() {
		return nil, false
	}
	k := sort.Search(len(c.batches), func(i int) bool {
		b := &c.batches[i]
		return b.first+uint64(len(b.recs)) > from
	})
	n, bytes := 0, int64(0)
	// Count first, to allocate the answer once.
	i := int(from - c.batches[k].first)
count:
	for j := k; j < len(c.batches); j++ {
		for ; i < len(c.batches[j].recs); i++ {
			sz := int64(c.batches[j].sizes[i])
			if n >= maxRecords || n > 0 && maxBytes > 0 && bytes+sz > int64(maxBytes) {
				break count
			}
			n++
			bytes += sz
		}
		i = 0
	}
	i = int(from - c.batches[k].first)
	if b := &c.batches[k]; i+n <= len(b.recs) {
		// Within one batch (a live feed's usual read): share it; records
		// are never modified once kept.
		return b.recs[i : i+n : i+n], true
	}
	out = make([]Record, 0, n)
	for j := k; len(out) < n; j++ {
		m := min(len(c.batches[j].recs), i+n-len(out))
		out = append(out, c.batches[j].recs[i:m]...)
		i = 0
	}
	return out, true
}

// RecentStats are the figures of a sequencer's recent records.
type RecentStats struct {
	Records int
	Bytes   int // memory held
	// Hits counts ReadSeq calls answered from memory; Misses those that
	// read records from the log.
	Hits, Misses uint64
}

func (c *recent) stats() RecentStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := RecentStats{Bytes: c.bytes, Hits: c.hits.Load(), Misses: c.misses.Load()}
	for i := range c.batches {
		st.Records += len(c.batches[i].recs)
	}
	return st
}

// keepRecent keeps the batch flush just appended: the staged records at
// positions from first on, with the indexes the log gave them.
func (s *Sequencer) keepRecent(first uint64, indexes []uint64) {
	u := &s.unit
	c := &s.recent
	if c.limit <= 0 || len(u.recs) == 0 {
		return
	}
	if r := c.reads.Load(); r != c.lastReads {
		c.lastReads, c.idle = r, 0
	} else if c.idle++; c.idle >= recentIdleBatches {
		if c.idle == recentIdleBatches {
			c.clear()
		}
		return
	}
	buf := make([]byte, len(u.buf))
	copy(buf, u.buf)
	recs := make([]Record, len(u.recs))
	sizes := make([]int32, len(u.recs))
	for k := range u.recs {
		e, r := &u.recs[k], &u.refs[k]
		recs[k] = Record{Seq: first + uint64(k), Topic: e.Topic, Index: indexes[k],
			Time: time.Unix(0, e.Time.UnixNano()).UTC(), Mark: e.Mark, Retain: e.Retain,
			QoS: r.qos, Key: r.key, Message: buf[r.msg:r.end:r.end]}
		sizes[k] = int32(topiclog.RecordLen(e.Topic, e.Payload))
	}
	s.recent.add(first, recs, sizes, buf)
}
