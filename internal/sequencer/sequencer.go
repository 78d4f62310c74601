package sequencer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// DefaultHorizon is the dedup window, in records: a retry is recognised
// while fewer than this many records were appended after the original.
const DefaultHorizon = 1 << 16

// Options configure a Sequencer.
type Options struct {
	// Log configures the group's topic log. A replicated group (Raft) uses
	// SyncNone: the Raft log is the durable record, and a replica whose
	// topic log lost a suffix in a crash is given those entries again. A
	// group without replicas (replication.Single) uses SyncAlways.
	Log topiclog.Options
	// Horizon is the dedup window in records (0: DefaultHorizon). It is
	// part of the replicated state machine: every replica of a group must
	// use the same, or they would disagree on which retries are
	// duplicates. Restore refuses a snapshot kept under another horizon.
	Horizon uint64
	// BatchEntries appends the publishes of all the entries of one Apply
	// call as one topic-log batch (one write, one fsync) instead of one
	// batch per entry. Only for a group without replicas
	// (replication.Single): replicas may be given the same entries in
	// different batches, and would then frame their logs differently.
	// Publishes are deduplicated exactly as with one batch per entry; only
	// retention, which removes whole segments, may remove other records
	// since the segments are cut elsewhere.
	BatchEntries bool
	// RecentBytes bounds the memory of the records kept for reads near
	// the log's end (recent.go; 0: DefaultRecentBytes, negative: keep
	// none).
	RecentBytes int
}

// Entry is one committed command, as the replication layer hands it to
// its state machine (replication.Entry, field for field: package
// sequencer/replica adapts one to the other, so that this package needs
// nothing of the replication layer).
type Entry struct {
	// Index is the entry's position in the group's Raft log: increasing,
	// not gap-free. It marks the records the entry appends.
	Index uint64
	Term  uint64
	// Time is when the leader appended the entry, the same on every
	// replica: the records' time and a retention tick's now.
	Time time.Time
	Cmd  []byte
}

// Result is what one entry did.
type Result struct {
	// Publishes has one element per publish of a publish command, in the
	// command's order.
	Publishes []Published
	// Removed is what a retention tick removed.
	Removed topiclog.Removed
	// Err is set when the entry was refused (undecodable, or invalid: it
	// wraps ErrInvalid); it then changed nothing, on every replica.
	Err error
}

// Published is where one publish went.
type Published struct {
	Index uint64 // in its topic, from 1: what subscribers see as sx-index
	Seq   uint64 // in the group's log, from 1: what cursors hold
	// Duplicate: the publish's key was already sequenced (a retry); Index
	// and Seq are the original's and nothing was appended.
	Duplicate bool
}

// Stats are a sequencer's figures.
type Stats struct {
	Applied      uint64
	Log          topiclog.Stats
	DedupEntries int
	// Duplicates counts publishes answered from the dedup table since Open.
	Duplicates uint64
	Recent     RecentStats
}

// Sequencer is a placement group's replicated state machine over its topic
// log. See the package documentation for who may call what; package
// sequencer/replica makes it a replication.FSM.
type Sequencer struct {
	// immutable after Open
	log     *topiclog.Log
	horizon uint64
	batch   bool

	applied    atomic.Uint64
	dedupLen   atomic.Int64
	duplicates atomic.Uint64
	recent     recent

	// owned by the apply goroutine (Apply, Snapshot, Restore)
	table  *table
	unit   unit
	failed error

	mu struct {
		sync.Mutex
		changed chan struct{} // closed and replaced at every change
		closed  bool
	}
}

// Open opens the group's topic log in dir and rebuilds the dedup table from
// its newest records (doc.go). Applied() is then the log's LastMark.
func Open(fsys topiclog.FS, dir string, opts Options) (*Sequencer, error) {
	if opts.Horizon == 0 {
		opts.Horizon = DefaultHorizon
	}
	l, err := topiclog.Open(fsys, dir, opts.Log)
	if err != nil {
		return nil, fmt.Errorf("sequencer: %w", err)
	}
	t, err := rebuild(l, opts.Horizon)
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("sequencer: open %s: %w", dir, err)
	}
	s := &Sequencer{log: l, horizon: opts.Horizon, batch: opts.BatchEntries, table: t}
	switch {
	case opts.RecentBytes == 0:
		s.recent.limit = DefaultRecentBytes
	case opts.RecentBytes > 0:
		s.recent.limit = opts.RecentBytes
	}
	s.unit.intra = map[uint64]int{}
	s.applied.Store(l.LastMark())
	s.dedupLen.Store(int64(t.len()))
	s.mu.changed = make(chan struct{})
	return s, nil
}

// floor is the first position the dedup window holds: the newest Horizon
// records, of those retention kept.
func floor(l *topiclog.Log, horizon uint64) uint64 {
	return windowFloor(l.FirstSeq(), l.NextSeq(), horizon)
}

func windowFloor(first, next, horizon uint64) uint64 {
	if next > horizon && next-horizon > first {
		return next - horizon
	}
	return first
}

// rebuild builds the dedup table from the records in the window.
func rebuild(l *topiclog.Log, horizon uint64) (*table, error) {
	t := newTable()
	for from, next := floor(l, horizon), l.NextSeq(); from < next; {
		recs, err := l.ReadSeq(from, 4096, 16<<20)
		if err != nil {
			return nil, fmt.Errorf("rebuild the dedup table: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			r := &recs[i]
			env, err := decodeEnvelope(r.Payload)
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", r.Seq, err)
			}
			if env.key.Valid() {
				t.insert(dedupKey{client: env.key.Client, pid: env.key.PacketID}, dedupEntry{nonce: env.key.Nonce, seq: r.Seq, index: r.Index})
			}
		}
		from = recs[len(recs)-1].Seq + 1
	}
	return t, nil
}

// Applied returns the index of the last entry applied: since Open, the
// last entry given to Apply (or the restored snapshot's); at Open, the
// log's LastMark, the last entry that appended a record. Entries after it
// that appended nothing (all duplicates, retention ticks, refused entries)
// are given again after a restart and give the same results.
func (s *Sequencer) Applied() uint64 { return s.applied.Load() }

// unit is the publishes staged for one topic-log batch.
type unit struct {
	recs  []topiclog.Entry
	refs  []staged // one per record
	dups  []intraDup
	intra map[uint64]int // table key -> its newest record in recs
	buf   []byte         // the records' envelopes
	bytes int            // an upper bound of the batch's size in the log
	last  uint64         // index of the last entry staged
}

type staged struct {
	entry, item int
	start, end  int // of the envelope in buf
	msg         int // where the message starts in buf
	qos         byte
	key         Key
	client      *client // the key's client in the table (nil without a key)
}

// intraDup is a retry of a record staged in the same unit.
type intraDup struct{ entry, item, rec int }

// recordOverhead bounds a record's size in the log beyond its topic and
// payload (the log's frame and fixed fields take 44 bytes).
const recordOverhead = 64

// Apply applies committed entries in order: each publish command is
// deduplicated and its new publishes appended to the topic log (one
// batch per entry, marked with the entry's index and stamped with its
// time; one batch per call with BatchEntries), each retention tick applied
// at its entry's time. It returns one Result per entry. An error is an I/O
// failure of the log: the sequencer refuses to apply anything more, and
// must be reopened.
func (s *Sequencer) Apply(entries []Entry) ([]Result, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	results := make([]Result, len(entries))
	for i := range entries {
		e := &entries[i]
		cmd, err := decodeCommand(e.Cmd, false)
		if err == nil && !timeStorable(e.Time) {
			err = fmt.Errorf("%w: entry time %v outside what the log stores", ErrInvalid, e.Time)
		}
		if err != nil {
			results[i].Err = fmt.Errorf("entry %d: %w", e.Index, err)
			s.done(e.Index)
			continue
		}
		switch cmd.Kind {
		case KindPublish:
			size := 0
			for j := range cmd.Publishes {
				p := &cmd.Publishes[j]
				size += recordOverhead + len(p.Topic) + envelopeLen(p)
			}
			if size > topiclog.MaxBatchBytes {
				results[i].Err = fmt.Errorf("entry %d: %w: %d bytes of records, more than a log batch takes", e.Index, ErrInvalid, size)
				s.done(e.Index)
				continue
			}
			if s.unit.bytes+size > topiclog.MaxBatchBytes {
				if err := s.flush(results); err != nil {
					return nil, s.fail(err)
				}
			}
			s.stage(i, e, cmd.Publishes, results)
			s.unit.bytes += size
			if !s.batch {
				if err := s.flush(results); err != nil {
					return nil, s.fail(err)
				}
			}
		case KindRetention:
			if err := s.flush(results); err != nil {
				return nil, s.fail(err)
			}
			removed, err := s.log.ApplyRetention(cmd.Retention, e.Time)
			if errors.Is(err, topiclog.ErrInvalid) {
				results[i].Err = fmt.Errorf("entry %d: %w: %w", e.Index, ErrInvalid, err)
				s.done(e.Index)
				continue
			}
			results[i].Removed = removed
			s.recent.trim(s.log.FirstSeq())
			// Removed records leave the dedup window even if removing
			// their files failed: the log no longer shows them.
			s.evict()
			s.notify()
			if err != nil {
				// The file comes back at the next Open, and this tick,
				// given again (it appended nothing), removes it.
				return nil, s.fail(fmt.Errorf("retention: %w", err))
			}
		}
		s.done(e.Index)
	}
	if err := s.flush(results); err != nil {
		return nil, s.fail(err)
	}
	return results, nil
}

// done records that entry index was handled: applied now, or with the
// staged batch once it is written.
func (s *Sequencer) done(index uint64) {
	if len(s.unit.recs) == 0 && len(s.unit.dups) == 0 {
		s.applied.Store(index)
		return
	}
	s.unit.last = index
}

func (s *Sequencer) fail(err error) error {
	s.failed = fmt.Errorf("sequencer: %w", err)
	return s.failed
}

// stage deduplicates the publishes of entry i and stages the new ones.
func (s *Sequencer) stage(i int, e *Entry, ps []Publish, results []Result) {
	u := &s.unit
	out := make([]Published, len(ps))
	results[i].Publishes = out
	// The entry sees the window as it is after the entries before it: in a
	// batch of several entries, records staged by earlier ones count, so
	// the decisions are those of one batch per entry.
	base := s.log.NextSeq()
	fl := windowFloor(s.log.FirstSeq(), base+uint64(len(u.recs)), s.horizon)
	for j := range ps {
		p := &ps[j]
		var (
			c  *client
			tk uint64
		)
		if p.Key.Valid() {
			c = s.table.resolve(p.Key.Client)
			tk = clientKey(c, p.Key.PacketID)
			if r, ok := u.intra[tk]; ok {
				if base+uint64(r) >= fl && u.refs[r].key.Nonce == p.Key.Nonce {
					u.dups = append(u.dups, intraDup{entry: i, item: j, rec: r})
					s.duplicates.Add(1)
					continue
				}
			} else if old, ok := s.table.lookupIn(c, p.Key.PacketID); ok && old.seq >= fl && old.nonce == p.Key.Nonce {
				out[j] = Published{Index: old.index, Seq: old.seq, Duplicate: true}
				s.duplicates.Add(1)
				continue
			}
			u.intra[tk] = len(u.recs)
		}
		start := len(u.buf)
		u.buf = appendEnvelope(u.buf, p)
		u.refs = append(u.refs, staged{entry: i, item: j, start: start, end: len(u.buf), msg: len(u.buf) - len(p.Message), qos: p.QoS, key: p.Key, client: c})
		u.recs = append(u.recs, topiclog.Entry{Topic: p.Topic, Time: e.Time, Mark: e.Index, Retain: p.Retain})
	}
	u.last = e.Index
}

// maxKeptBuf bounds the envelope buffer kept between batches.
const maxKeptBuf = 1 << 20

// flush appends the staged records as one batch, fills in their results
// and the duplicates of them, and updates the dedup table.
func (s *Sequencer) flush(results []Result) error {
	u := &s.unit
	if len(u.recs) == 0 && len(u.dups) == 0 {
		return nil
	}
	for k := range u.recs {
		u.recs[k].Payload = u.buf[u.refs[k].start:u.refs[k].end]
	}
	var app topiclog.Appended
	if len(u.recs) > 0 {
		var err error
		if app, err = s.log.AppendBatch(u.recs); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		s.keepRecent(app.FirstSeq, app.Indexes)
	}
	for k, r := range u.refs {
		pub := Published{Index: app.Indexes[k], Seq: app.FirstSeq + uint64(k)}
		results[r.entry].Publishes[r.item] = pub
		if r.key.Valid() {
			s.table.insertIn(r.client, r.key.PacketID, dedupEntry{nonce: r.key.Nonce, seq: pub.Seq, index: pub.Index})
		}
	}
	for _, d := range u.dups {
		r := u.refs[d.rec]
		pub := results[r.entry].Publishes[r.item]
		pub.Duplicate = true
		results[d.entry].Publishes[d.item] = pub
	}
	s.evict()
	s.applied.Store(u.last)
	clear(u.recs) // do not pin payloads until the next batch
	clear(u.refs)
	u.recs, u.refs, u.dups = u.recs[:0], u.refs[:0], u.dups[:0]
	clear(u.intra)
	if cap(u.buf) > maxKeptBuf {
		u.buf = nil
	}
	u.buf, u.bytes = u.buf[:0], 0
	if len(app.Indexes) > 0 {
		s.notify()
	}
	return nil
}

// evict drops the dedup entries below the window.
func (s *Sequencer) evict() {
	s.table.evict(floor(s.log, s.horizon))
	s.dedupLen.Store(int64(s.table.len()))
}

// notify wakes the readers waiting for a change.
func (s *Sequencer) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// Stats returns the sequencer's figures. Safe to call at any time.
func (s *Sequencer) Stats() Stats {
	return Stats{Applied: s.applied.Load(), Log: s.log.Stats(), DedupEntries: int(s.dedupLen.Load()), Duplicates: s.duplicates.Load(),
		Recent: s.recent.stats()}
}

// Close closes the topic log (syncing it) and wakes every waiting reader
// with ErrClosed. Call it after the replica that applies to it closed.
func (s *Sequencer) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.mu.closed = true
	close(s.mu.changed)
	s.mu.Unlock()
	s.recent.clear()
	if err := s.log.Close(); err != nil {
		return fmt.Errorf("sequencer: close: %w", err)
	}
	return nil
}
