package topiclog

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Entry is one record to append. The log assigns its position and index.
type Entry struct {
	Topic   string // non-empty, at most MaxTopicLen bytes
	Payload []byte // opaque to the log (an encoded message.Message)
	// Time is the caller's timestamp (the log never reads a clock, so that
	// replicas applying the same entries stay identical). Age-based
	// retention and Options.SegmentAge use it. Stored with nanosecond
	// precision; years 1678 to 2262.
	Time time.Time
	// Mark is opaque to the log; LastMark returns the last record's (the
	// replication layer stores the Raft index of the entry here).
	Mark   uint64
	Retain bool // the record is the topic's retained message (see LatestRetained)
}

// Record is a record read from the log. Its Payload is the caller's own
// (the log does not reuse it), but the payloads of one read may share one
// array: do not append to them.
type Record struct {
	Seq     uint64 // position in the group's log, from 1, gap-free
	Topic   string
	Index   uint64 // index within the topic, from 1, gap-free
	Time    time.Time
	Mark    uint64
	Retain  bool
	Payload []byte
}

// Appended says what AppendBatch assigned: entries[i] got position
// FirstSeq+i and index Indexes[i].
type Appended struct {
	FirstSeq uint64
	Indexes  []uint64
}

// Log is one placement group's topic log: a directory of segment files.
// See the package documentation for the concurrency contract.
type Log struct {
	// Immutable after Open.
	fs   FS
	dir  string
	opts Options
	log  *slog.Logger
	rec  Recovery

	// wmu serialises the writer's methods (AppendBatch, ApplyRetention,
	// Restore, Close) and is held across their disk I/O. Readers never
	// take it. While holding wmu the writer may read the fields under mu
	// without mu, since only it changes them.
	wmu sync.Mutex
	w   struct { // under wmu
		buf    []byte
		failed error // sticky: see ErrFailed
		closed bool
	}

	mu struct {
		sync.RWMutex
		state
		closed bool
	}
}

// state is what readers see: the published segments and topics.
type state struct {
	segs     []*segment // by position; the last is the active one
	topics   map[string]*topicState
	next     uint64 // position of the next record
	lastMark uint64
	bytes    int64 // sum of the segments' sizes
	records  uint64
}

// segment is one file. Its offs, size and times grow while it is active
// (under Log.mu); the rest is fixed.
type segment struct {
	first uint64 // position of its first record
	path  string
	file  File
	refs  atomic.Int32 // the log's own reference plus one per reader or snapshot

	offs      []uint32 // offset of each record; offs[0] is the header's length
	size      int64    // published bytes: readers see only records below it
	firstTime int64    // time of the first record (Unix ns)
	maxTime   int64    // newest record time (Unix ns); math.MinInt64 if none
}

func (s *segment) count() uint64 { return uint64(len(s.offs)) }

// recordSpan returns the offset and length of the i-th record.
func (s *segment) recordSpan(i int) (int64, int64) {
	off := int64(s.offs[i])
	end := s.size
	if i+1 < len(s.offs) {
		end = int64(s.offs[i+1])
	}
	return off, end - off
}

func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference; the last one closes the file. A close error
// is of no consequence here (the file is only read through this handle, or
// already synced and no longer written).
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.file.Close()
	}
}

type topicState struct {
	name        string
	first, last uint64 // retained indexes; first == last+1 when none are held
	retained    uint64 // position of the latest record with Retain; 0: none held
	seqs        seqList
}

// Recovery reports what Open found and repaired.
type Recovery struct {
	Segments       int // segment files loaded
	Records        uint64
	TornTails      int   // torn or corrupt tails truncated (0 or 1)
	TruncatedBytes int64 // bytes they held
	// RestoreFinished is set when Open completed a Restore that a crash had
	// interrupted after its commit point.
	RestoreFinished bool
}

// Stats is a summary of the log, for metrics and the admin API.
type Stats struct {
	FirstSeq, NextSeq uint64 // retained positions are [FirstSeq, NextSeq)
	Records           uint64
	Bytes             int64
	Segments          int
	Topics            int
	LastMark          uint64
}

const (
	segSuffix     = ".seg"
	stagingPrefix = "restore-"
	markerName    = "RESTORE"
	markerTmp     = "RESTORE.tmp"
)

func segName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

// parseSegName returns the first position a segment file name declares.
func parseSegName(name string) (uint64, bool) {
	num, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(num) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	return n, err == nil
}

// Open opens the log in dir, creating it if needed, and recovers it: it
// finishes or discards an interrupted Restore, verifies every record,
// truncates a torn tail of the last segment and rebuilds the index. Damage
// anywhere else is refused with an error wrapping ErrCorrupt.
func Open(fsys FS, dir string, opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := &Log{fs: fsys, dir: dir, opts: opts.withDefaults()}
	l.log = l.opts.Logger.With("log", dir)
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("topiclog: open %s: %w", dir, err)
	}
	finished, err := settleRestore(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("topiclog: open %s: %w", dir, err)
	}
	if finished {
		l.log.Warn("topiclog: finished a restore interrupted by a crash")
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("topiclog: open %s: %w", dir, err)
	}
	var firsts []uint64
	for _, name := range names {
		if first, ok := parseSegName(name); ok {
			firsts = append(firsts, first)
		} else {
			l.log.Warn("topiclog: ignoring an unknown file", "file", name)
		}
	}
	ld := loader{fs: fsys, dir: dir, tolerateTail: true, log: l.log}
	st, err := ld.load(firsts)
	if err != nil {
		return nil, fmt.Errorf("topiclog: open %s: %w", dir, err)
	}
	if len(st.segs) == 0 {
		hdr := appendHeader(nil, &header{first: 1})
		seg, err := l.createSegment(1, hdr, len(hdr))
		if err != nil {
			if seg != nil {
				seg.release()
			}
			return nil, fmt.Errorf("topiclog: open %s: %w", dir, err)
		}
		st.segs = append(st.segs, seg)
		st.bytes = seg.size
		st.next = 1
	}
	l.rec = Recovery{Segments: len(firsts), Records: st.records, TornTails: ld.tornTails, TruncatedBytes: ld.truncated, RestoreFinished: finished}
	if ld.tornTails > 0 {
		l.log.Warn("topiclog: truncated a torn tail", "bytes", ld.truncated)
	}
	l.mu.state = st
	return l, nil
}

// Recovery reports what Open found.
func (l *Log) Recovery() Recovery { return l.rec }

// topicTable returns every topic with its last index, sorted, plus the
// pending updates of a batch being written.
func topicTable(topics map[string]*topicState, pending map[string]*pendingTopic) []topicLast {
	table := make([]topicLast, 0, len(topics)+len(pending))
	for name, t := range topics {
		last := t.last
		if p := pending[name]; p != nil {
			last = p.last
		}
		table = append(table, topicLast{topic: name, last: last})
	}
	for name, p := range pending {
		if p.t == nil && len(p.seqs) > 0 {
			table = append(table, topicLast{topic: name, last: p.last})
		}
	}
	slices.SortFunc(table, func(a, b topicLast) int { return strings.Compare(a.topic, b.topic) })
	return table
}

// createSegment creates the file of a segment starting at first and writes
// data (its header, of hlen bytes, and any records already encoded after
// it), then syncs the file and the directory whatever the sync policy, so
// that every segment's header is durable before anything is written after it
// and only the last segment can lack one after a crash. The segment returned
// holds no published record yet.
func (l *Log) createSegment(first uint64, data []byte, hlen int) (*segment, error) {
	path := join(l.dir, segName(first))
	f, err := l.fs.Create(path)
	if err != nil {
		return nil, err
	}
	seg := &segment{first: first, path: path, file: f, size: int64(hlen), maxTime: math.MinInt64}
	seg.refs.Store(1)
	if _, err := f.WriteAt(data, 0); err != nil {
		return seg, err
	}
	if err := f.Sync(); err != nil {
		return seg, err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return seg, err
	}
	return seg, nil
}

// Close syncs the active segment (so a clean shutdown keeps everything even
// with SyncNone) and closes the log. Reads in progress finish; later calls
// return ErrClosed.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w.closed {
		return ErrClosed
	}
	l.w.closed = true
	var err error
	segs := l.mu.segs
	if l.w.failed == nil && l.opts.Sync == SyncNone {
		if serr := segs[len(segs)-1].file.Sync(); serr != nil {
			err = fmt.Errorf("topiclog: close %s: %w", l.dir, serr)
		}
	}
	l.mu.Lock()
	l.mu.closed = true
	l.mu.segs = nil
	l.mu.topics = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
	return err
}

// LastMark returns the mark of the log's last record (0 if none), so a
// replicated group knows after a restart which entry it applied last.
func (l *Log) LastMark() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.lastMark
}

// NextSeq returns the position the next record will get.
func (l *Log) NextSeq() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.next
}

// FirstSeq returns the first position still held (NextSeq if none is).
func (l *Log) FirstSeq() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.mu.segs) == 0 {
		return l.mu.next
	}
	return l.mu.segs[0].first
}

// Bounds returns the topic's first and last retained index: the topic holds
// [first, last], which is empty (first == last+1) when retention removed
// all its records. ok is false for a topic the log has never seen.
func (l *Log) Bounds(topic string) (first, last uint64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	t := l.mu.topics[topic]
	if t == nil {
		return 0, 0, false
	}
	return t.first, t.last, true
}

// Topics returns the names of every topic the log has seen, sorted.
func (l *Log) Topics() []string {
	l.mu.RLock()
	names := make([]string, 0, len(l.mu.topics))
	for name := range l.mu.topics {
		names = append(names, name)
	}
	l.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Stats returns a summary of the log.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	st := Stats{NextSeq: l.mu.next, FirstSeq: l.mu.next, Records: l.mu.records, Bytes: l.mu.bytes,
		Segments: len(l.mu.segs), Topics: len(l.mu.topics), LastMark: l.mu.lastMark}
	if len(l.mu.segs) > 0 {
		st.FirstSeq = l.mu.segs[0].first
	}
	return st
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	FirstSeq uint64 // position of its first record
	Records  uint64
	Bytes    int64
	MaxTime  time.Time // newest record time; zero if it holds none
}

// Segments describes the segment files, oldest first; the last is active.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.mu.segs))
	for i, s := range l.mu.segs {
		out[i] = SegmentInfo{FirstSeq: s.first, Records: s.count(), Bytes: s.size}
		if s.maxTime != math.MinInt64 {
			out[i].MaxTime = time.Unix(0, s.maxTime).UTC()
		}
	}
	return out
}
