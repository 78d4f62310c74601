package topiclog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"
)

// model is the oracle the log is compared with: plain slices, no segments,
// no index.
type model struct {
	recs    []Record            // recs[i].Seq == i+1; those below first are compacted
	first   uint64              // first retained position
	byTopic map[string][]uint64 // each topic's positions, by index-1
	ends    map[uint64]bool     // positions that end a batch
}

func newModel() *model {
	return &model{first: 1, byTopic: map[string][]uint64{}, ends: map[uint64]bool{}}
}

func (m *model) clone() *model {
	c := &model{recs: slices.Clone(m.recs), first: m.first, byTopic: map[string][]uint64{}, ends: maps.Clone(m.ends)}
	for k, v := range m.byTopic {
		c.byTopic[k] = slices.Clone(v)
	}
	return c
}

func (m *model) next() uint64 { return uint64(len(m.recs)) + 1 }

func (m *model) lastMark() uint64 {
	if len(m.recs) == 0 {
		return 0
	}
	return m.recs[len(m.recs)-1].Mark
}

// add appends e as a batch of its own.
func (m *model) add(e Entry) Record { return m.addBatch(e)[0] }

// addBatch appends es as one batch.
func (m *model) addBatch(es ...Entry) []Record {
	var out []Record
	for _, e := range es {
		out = append(out, m.add1(e))
	}
	if len(es) > 0 {
		m.ends[m.next()-1] = true
	}
	return out
}

// batches returns the entries of the records from position 1, batch by
// batch, to feed a twin log.
func (m *model) batches() [][]Entry {
	var out [][]Entry
	var cur []Entry
	for _, r := range m.recs {
		cur = append(cur, Entry{Topic: r.Topic, Payload: r.Payload, Time: r.Time, Mark: r.Mark, Retain: r.Retain})
		if m.ends[r.Seq] {
			out = append(out, cur)
			cur = nil
		}
	}
	return out
}

func (m *model) add1(e Entry) Record {
	r := Record{Seq: m.next(), Topic: e.Topic, Index: uint64(len(m.byTopic[e.Topic])) + 1, Time: e.Time.UTC(),
		Mark: e.Mark, Retain: e.Retain, Payload: slices.Clone(e.Payload)}
	if len(r.Payload) == 0 {
		r.Payload = nil
	}
	m.recs = append(m.recs, r)
	m.byTopic[e.Topic] = append(m.byTopic[e.Topic], r.Seq)
	return r
}

// truncate keeps the records below next (what a crash left), which must
// be a batch boundary.
func (m *model) truncate(next uint64) {
	if next > 1 && !m.ends[next-1] {
		panic(fmt.Sprintf("model truncated to %d, inside a batch", next))
	}
	for s := range m.ends {
		if s >= next {
			delete(m.ends, s)
		}
	}
	m.recs = m.recs[:next-1]
	for k, v := range m.byTopic {
		n := sort.Search(len(v), func(i int) bool { return v[i] >= next })
		if n == 0 {
			delete(m.byTopic, k)
		} else {
			m.byTopic[k] = v[:n]
		}
	}
}

// firstIndex is a topic's first retained index.
func (m *model) firstIndex(topic string) uint64 {
	v := m.byTopic[topic]
	return uint64(sort.Search(len(v), func(i int) bool { return v[i] >= m.first })) + 1
}

func frameLen(r Record) int64 { return int64(8 + 36 + len(r.Topic) + len(r.Payload)) }

// take applies Range/ReadSeq limits to candidate positions.
func (m *model) take(seqs []uint64, maxRecs, maxBytes int) []Record {
	var out []Record
	var n int64
	for _, s := range seqs {
		r := m.recs[s-1]
		if len(out) >= maxRecs || len(out) > 0 && maxBytes > 0 && n+frameLen(r) > int64(maxBytes) {
			break
		}
		out = append(out, r)
		n += frameLen(r)
	}
	return out
}

func (m *model) rangeOf(topic string, from uint64, maxRecs, maxBytes int) ([]Record, error) {
	v, ok := m.byTopic[topic]
	if !ok {
		return nil, nil
	}
	if fi := m.firstIndex(topic); from < fi {
		return nil, compacted(fi)
	}
	if from > uint64(len(v)) {
		return nil, nil
	}
	return m.take(v[from-1:], maxRecs, maxBytes), nil
}

func (m *model) readSeq(from uint64, maxRecs, maxBytes int) ([]Record, error) {
	if from < m.first {
		return nil, compacted(m.first)
	}
	var seqs []uint64
	for s := from; s < m.next() && len(seqs) <= maxRecs; s++ {
		seqs = append(seqs, s)
	}
	return m.take(seqs, maxRecs, maxBytes), nil
}

func (m *model) latest(topic string, retained bool) (Record, bool) {
	v := m.byTopic[topic]
	for i := len(v) - 1; i >= 0 && v[i] >= m.first; i-- {
		if r := m.recs[v[i]-1]; !retained || r.Retain {
			return r, true
		}
	}
	return Record{}, false
}

func sameErr(got, want error) bool {
	if want == nil || got == nil {
		return got == nil && want == nil
	}
	if wf, ok := compactedFirst(want); ok {
		gf, gok := compactedFirst(got)
		return gok && gf == wf
	}
	return errors.Is(got, ErrNotFound) && errors.Is(want, ErrNotFound)
}

func sameRecords(a, b []Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameRecord(a[i], b[i]) {
			return false
		}
	}
	return true
}

func checkRange(t *testing.T, l *Log, m *model, topic string, from uint64, maxRecs, maxBytes int) {
	t.Helper()
	got, gerr := l.Range(topic, from, maxRecs, maxBytes)
	want, werr := m.rangeOf(topic, from, maxRecs, maxBytes)
	if !sameErr(gerr, werr) || !sameRecords(got, want) {
		t.Fatalf("Range(%q, %d, %d, %d) = %d records, %v; want %d, %v", topic, from, maxRecs, maxBytes, len(got), gerr, len(want), werr)
	}
}

func checkGet(t *testing.T, l *Log, m *model, topic string, index uint64) {
	t.Helper()
	got, gerr := l.Get(topic, index)
	want, werr := m.rangeOf(topic, index, 1, 0)
	if werr == nil && len(want) == 0 {
		werr = ErrNotFound
	}
	if !sameErr(gerr, werr) || werr == nil && !sameRecord(got, want[0]) {
		t.Fatalf("Get(%q, %d) = %s, %v; want %v, %v", topic, index, describe(got), gerr, want, werr)
	}
}

func checkReadSeq(t *testing.T, l *Log, m *model, from uint64, maxRecs, maxBytes int) {
	t.Helper()
	got, gerr := l.ReadSeq(from, maxRecs, maxBytes)
	want, werr := m.readSeq(from, maxRecs, maxBytes)
	if !sameErr(gerr, werr) || !sameRecords(got, want) {
		t.Fatalf("ReadSeq(%d, %d, %d) = %d records, %v; want %d, %v", from, maxRecs, maxBytes, len(got), gerr, len(want), werr)
	}
}

// checkAll compares everything the log exposes with the model.
func checkAll(t *testing.T, l *Log, m *model) {
	t.Helper()
	if l.NextSeq() != m.next() || l.FirstSeq() != m.first || l.LastMark() != m.lastMark() {
		t.Fatalf("next %d first %d mark %d; want %d %d %d", l.NextSeq(), l.FirstSeq(), l.LastMark(), m.next(), m.first, m.lastMark())
	}
	st := l.Stats()
	if st.Records != m.next()-m.first || st.Topics != len(m.byTopic) {
		t.Fatalf("stats %+v; model holds %d records of %d topics", st, m.next()-m.first, len(m.byTopic))
	}
	var segRecs uint64
	var segBytes int64
	for i, s := range l.Segments() {
		if i == 0 && s.FirstSeq != m.first || s.FirstSeq != m.first+segRecs {
			t.Fatalf("segment %d starts at %d, want %d", i, s.FirstSeq, m.first+segRecs)
		}
		segRecs += s.Records
		segBytes += s.Bytes
	}
	if segRecs != st.Records || segBytes != st.Bytes {
		t.Fatalf("segments hold %d records, %d bytes; stats say %d, %d", segRecs, segBytes, st.Records, st.Bytes)
	}
	topics := l.Topics()
	if len(topics) != len(m.byTopic) {
		t.Fatalf("topics %v; model has %d", topics, len(m.byTopic))
	}
	for _, topic := range topics {
		first, last, ok := l.Bounds(topic)
		if !ok || first != m.firstIndex(topic) || last != uint64(len(m.byTopic[topic])) {
			t.Fatalf("Bounds(%q) = %d, %d, %v; want %d, %d", topic, first, last, ok, m.firstIndex(topic), len(m.byTopic[topic]))
		}
		for _, retained := range []bool{false, true} {
			got, gerr := l.latest(topic, retained)
			want, ok := m.latest(topic, retained)
			if ok != (gerr == nil) || ok && !sameRecord(got, want) || !ok && !errors.Is(gerr, ErrNotFound) {
				t.Fatalf("latest(%q, retained %v) = %s, %v; want %s, %v", topic, retained, describe(got), gerr, describe(want), ok)
			}
		}
	}
	for from := m.first; from < m.next(); {
		got, err := l.ReadSeq(from, 97, 0)
		want, _ := m.readSeq(from, 97, 0)
		if err != nil || !sameRecords(got, want) {
			t.Fatalf("ReadSeq(%d) = %d records, %v; want %d", from, len(got), err, len(want))
		}
		from += uint64(len(got))
	}
}

// checkRetention checks a retention pass against the model: every segment
// it deleted was allowed to go, and the first one it kept (unless active)
// was not.
func checkRetention(t *testing.T, m *model, segs []SegmentInfo, rm Removed, r Retention, now time.Time) {
	t.Helper()
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	var gone int64
	allowed := func(i int) string {
		s := segs[i]
		end := s.FirstSeq + s.Records
		if r.MaxAge > 0 {
			old := true
			for q := s.FirstSeq; q < end; q++ {
				if !m.recs[q-1].Time.Before(now.Add(-r.MaxAge)) {
					old = false
				}
			}
			if old {
				return "age"
			}
		}
		if r.MaxBytes > 0 && total-gone > r.MaxBytes {
			return "bytes"
		}
		if r.MaxRecordsPerTopic > 0 {
			ok := true
			for _, v := range m.byTopic {
				before, after := 0, 0
				for _, q := range v {
					switch {
					case q >= end:
						after++
					case q >= m.first:
						before++
					}
				}
				if before > 0 && uint64(after) < r.MaxRecordsPerTopic {
					ok = false
				}
			}
			if ok {
				return "count"
			}
		}
		return ""
	}
	for i := 0; i < rm.Segments; i++ {
		if allowed(i) == "" {
			t.Fatalf("retention %+v at %v deleted segment %d (%+v), which no bound allows", r, now, i, segs[i])
		}
		gone += segs[i].Bytes
	}
	if k := rm.Segments; k < len(segs)-1 {
		if why := allowed(k); why != "" {
			t.Fatalf("retention %+v at %v kept segment %d (%+v), which %s allows to go", r, now, k, segs[k], why)
		}
	}
	if rm.FirstSeq != segs[rm.Segments].FirstSeq {
		t.Fatalf("retention reports first %d, want %d", rm.FirstSeq, segs[rm.Segments].FirstSeq)
	}
}

func modelName(opts Options, topics int) string {
	return fmt.Sprintf("seg%d/age%v/%v/topics%d", opts.SegmentBytes, opts.SegmentAge, opts.Sync, topics)
}
