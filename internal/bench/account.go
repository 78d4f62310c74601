package bench

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// bitset is a growable set of sequence numbers.
type bitset []uint64

// testAndSet adds i and reports whether it was already there.
func (b *bitset) testAndSet(i uint32) bool {
	w := int(i >> 6)
	if w >= len(*b) {
		nb := make(bitset, max(w+1, 2*len(*b), 16))
		copy(nb, *b)
		*b = nb
	}
	m := uint64(1) << (i & 63)
	had := (*b)[w]&m != 0
	(*b)[w] |= m
	return had
}

// track is what one subscriber saw of one publisher.
type track struct {
	seen      bitset
	maxSeq    int64 // -1 before the first message
	unique    int64
	dups      int64
	reordered int64
}

// subscriber is the accounting of one subscribing client. Its fields are
// written only by that client's reader goroutine while the run is going,
// and read by Run after the client has stopped; received is also read by
// the progress ticker.
type subscriber struct {
	topic    int // index of the topic it subscribes to; -1: every topic
	tracks   []track
	foreign  int64       // payloads without a generator header, or from an unknown publisher
	probed   atomic.Bool // a warm-up probe arrived
	received atomic.Int64
	lastRecv atomic.Int64 // Unix nanoseconds
	lat      *shard
	seq      *seqCheck // nil unless the run checks sx-index (Config.Sequenced)
}

func newSubscriber(topic, pubs int, lat *shard) *subscriber {
	s := &subscriber{topic: topic, tracks: make([]track, pubs), lat: lat}
	for i := range s.tracks {
		s.tracks[i].maxSeq = -1
	}
	return s
}

// onPublish is the subscriber's mqttclient.Handler.
func (s *subscriber) onPublish(p *packet.Publish) {
	now := time.Now()
	if s.seq != nil {
		s.seq.check(p)
	}
	h, ok := ParseHeader(p.Payload)
	if !ok || int(h.Pub) >= len(s.tracks) {
		if string(p.Payload) == probePayload {
			s.probed.Store(true)
			return
		}
		s.foreign++
		return
	}
	t := &s.tracks[h.Pub]
	if t.seen.testAndSet(h.Seq) {
		t.dups++
		return
	}
	t.unique++
	if int64(h.Seq) < t.maxSeq {
		t.reordered++
	} else {
		t.maxSeq = int64(h.Seq)
	}
	s.lat.record(now.Sub(h.Sent))
	s.received.Add(1)
	s.lastRecv.Store(now.UnixNano())
}

// shard is one latency histogram with its lock. Subscribers share a few
// shards so that thousands of them do not each hold a histogram.
type shard struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// Latencies are recorded in microseconds from 1 µs to 10 minutes, with 3
// significant digits.
const (
	latMin = 1
	latMax = int64(10 * time.Minute / time.Microsecond)
)

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(latMin, latMax, 3) }

func (s *shard) record(d time.Duration) {
	us := int64(d / time.Microsecond)
	us = min(max(us, latMin), latMax)
	s.mu.Lock()
	_ = s.h.RecordValue(us)
	s.mu.Unlock()
}

// Latency summarises a histogram, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// Summarize returns the percentiles of h (recorded in microseconds).
func Summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		Count: h.TotalCount(),
		Min:   ms(h.Min()),
		Mean:  h.Mean() / 1000,
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}

// NewLatencyRecorder returns a histogram for callers outside a run (the
// sub and ping commands) that summarise with Summarize; record durations
// with RecordLatency.
func NewLatencyRecorder() *hdrhistogram.Histogram { return newHistogram() }

// RecordLatency records d into h (made by NewLatencyRecorder).
func RecordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := min(max(int64(d/time.Microsecond), latMin), latMax)
	_ = h.RecordValue(us)
}

// PubAccount is the fate of one publisher's messages, over all subscribers
// that should have received them.
type PubAccount struct {
	Pub        int   `json:"pub"`
	Sent       int64 `json:"sent"`
	Expected   int64 `json:"expected"` // deliveries owed: sent x matching subscribers
	Received   int64 `json:"received"` // distinct deliveries
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	Reordered  int64 `json:"reordered"`
}

// account totals what the subscribers saw against what the publishers
// sent. sent[p][t] is what publisher p sent to topic t.
func account(subs []*subscriber, sent [][]int64) []PubAccount {
	out := make([]PubAccount, len(sent))
	for p := range sent {
		out[p].Pub = p
		for _, n := range sent[p] {
			out[p].Sent += n
		}
	}
	for _, s := range subs {
		for p := range s.tracks {
			var exp int64
			if s.topic < 0 {
				exp = out[p].Sent
			} else if s.topic < len(sent[p]) {
				exp = sent[p][s.topic]
			}
			t := &s.tracks[p]
			a := &out[p]
			a.Expected += exp
			a.Received += t.unique
			a.Lost += max(exp-t.unique, 0)
			a.Duplicated += t.dups
			a.Reordered += t.reordered
		}
	}
	return out
}

// seqCheck follows the sx-index of every topic one subscriber receives:
// each delivery of a sequenced topic must carry one, and a topic's indexes
// must rise by one from the first seen (a subscription starts anywhere in
// the log, then has no gap).
type seqCheck struct {
	last map[string]uint64
	SeqStats
}

// SeqStats is what the subscribers saw of sx-index (Config.Sequenced).
type SeqStats struct {
	Indexed   int64 `json:"indexed"`   // deliveries carrying an sx-index
	Missing   int64 `json:"missing"`   // deliveries without one (or not a number)
	Gaps      int64 `json:"gaps"`      // indexes skipped: a delivery above last+1 counts the difference
	Backwards int64 `json:"backwards"` // a delivery at or below the last index of its topic
}

func newSeqCheck() *seqCheck { return &seqCheck{last: map[string]uint64{}} }

func (c *seqCheck) check(p *packet.Publish) {
	var idx uint64
	found := false
	for _, u := range p.Props.User {
		if u.Key == "sx-index" {
			n, err := strconv.ParseUint(u.Value, 10, 64)
			idx, found = n, err == nil && n > 0
			break
		}
	}
	if !found {
		c.Missing++
		return
	}
	c.Indexed++
	last, seen := c.last[p.Topic]
	switch {
	case !seen || idx == last+1:
	case idx <= last:
		c.Backwards++
		return
	default:
		c.Gaps += int64(idx - last - 1)
	}
	c.last[p.Topic] = idx
}

func (a *SeqStats) add(b SeqStats) {
	a.Indexed += b.Indexed
	a.Missing += b.Missing
	a.Gaps += b.Gaps
	a.Backwards += b.Backwards
}
