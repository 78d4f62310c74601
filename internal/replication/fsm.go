package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Entry is one committed command, as every replica's state machine sees it.
type Entry struct {
	// Index is the entry's position in the group's log: strictly
	// increasing, but not gap-free (the log also holds Raft's own entries).
	Index uint64
	// Term is the term of the leader that appended the entry; it only
	// grows, so it serves as the group's epoch.
	Term uint64
	// Time is when the leader appended the entry; every replica sees the
	// same value, so it may decide retention by age deterministically.
	Time time.Time
	// Cmd is the proposed command. The state machine may keep it; nobody
	// modifies it after Submit.
	Cmd []byte
}

// FSM is the state machine a group replicates (the sequencing state machine
// in production). It is called by one goroutine at a time, the group's
// apply goroutine, except Snapshot.Persist, which runs concurrently with
// Apply. See the package comment for the contract in full.
type FSM[R any] interface {
	// Applied returns the index of the last entry whose effect the state
	// holds (0 if none), including entries applied before a restart and
	// entries covered by a restored snapshot. It may stay behind entries
	// that changed nothing (a deduplicated publish leaves no record):
	// those are given again after a restart, and applying them again must
	// be harmless. The group calls it before it starts, to skip entries
	// Raft replays, and after each batch.
	Applied() uint64
	// Apply applies committed entries, in order, and returns one result
	// per entry. It must be deterministic: every replica applies the same
	// entries and must reach the same state and results. Afterwards
	// Applied() must not exceed the last entry's index. An error is fatal
	// for the replica: the group stops applying and shuts down, and the
	// entries of the batch get ErrFailed.
	Apply(entries []Entry) ([]R, error)
	// Snapshot captures the state as of Applied(). It must return quickly
	// (take a reference or copy; write in Persist), since Apply waits for
	// it.
	Snapshot() (Snapshot, error)
	// Restore replaces the whole state with a snapshot's (as written by
	// Persist on some replica). Afterwards Applied() must return the index
	// the snapshot was taken at.
	Restore(r io.Reader) error
}

// Snapshot is a captured state of an FSM.
type Snapshot interface {
	// Persist writes the captured state to w. It runs concurrently with
	// Apply.
	Persist(w io.Writer) error
	// Release is called when the snapshot is no longer needed, whether or
	// not Persist was called.
	Release()
}

// snapshotMagic starts every snapshot the group stores: a version, then the
// index of the state machine's last applied entry, then the state
// machine's own bytes. The index lets a restarted replica decide, without
// decoding the state, whether its state machine is already at or beyond the
// snapshot.
var snapshotMagic = [4]byte{'S', 'X', 'R', 'S'}

const (
	snapshotVersion   = 1
	snapshotHeaderLen = 4 + 1 + 8
)

func appendSnapshotHeader(b []byte, applied uint64) []byte {
	b = append(b, snapshotMagic[:]...)
	b = append(b, snapshotVersion)
	return binary.BigEndian.AppendUint64(b, applied)
}

// parseSnapshotHeader decodes the header at the start of b.
func parseSnapshotHeader(b []byte) (applied uint64, err error) {
	if len(b) < snapshotHeaderLen {
		return 0, fmt.Errorf("%w: snapshot header has %d bytes, want %d", ErrCorrupt, len(b), snapshotHeaderLen)
	}
	if [4]byte(b[:4]) != snapshotMagic {
		return 0, fmt.Errorf("%w: snapshot does not start with %q", ErrCorrupt, snapshotMagic[:])
	}
	if b[4] != snapshotVersion {
		return 0, fmt.Errorf("%w: snapshot version %d, want %d", ErrCorrupt, b[4], snapshotVersion)
	}
	return binary.BigEndian.Uint64(b[5:snapshotHeaderLen]), nil
}

func readSnapshotHeader(r io.Reader) (uint64, error) {
	var b [snapshotHeaderLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("%w: read snapshot header: %w", ErrCorrupt, err)
	}
	return parseSnapshotHeader(b[:])
}

// outcome is what the apply goroutine hands back for one entry: the FSM's
// result, or why there is none.
type outcome[R any] struct {
	res R
	err error
}

// machine adapts an FSM to Raft's batching state machine. Raft calls
// ApplyBatch, Apply, Snapshot and Restore from its FSM goroutine, one at a
// time.
type machine[R any] struct {
	// immutable
	fsm     FSM[R]
	metrics *metrics
	onFail  func(error)              // called once, on the FSM goroutine; must not block
	durable func(index uint64) error // waits until the local log holds every entry up to index on disk

	applied atomic.Uint64 // the last entry the FSM accepted (or held at start, or restored)
	failed  atomic.Bool

	// owned by the FSM goroutine
	entries []Entry
	from    []int // entries[i] came from logs[from[i]]
}

var (
	_ raft.BatchingFSM = (*machine[int])(nil)
	_ raft.FSMSnapshot = (*snapshot)(nil)
)

func newMachine[R any](fsm FSM[R], m *metrics, onFail func(error), durable func(uint64) error) *machine[R] {
	mc := &machine[R]{fsm: fsm, metrics: m, onFail: onFail, durable: durable}
	mc.applied.Store(fsm.Applied())
	return mc
}

// ApplyBatch applies the command entries among logs that the state
// machine does not hold yet. Entries at or below Applied() are ones Raft
// replays after a restart; skipping them is what keeps a durable state
// machine from applying an entry twice.
func (m *machine[R]) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if m.failed.Load() {
		for i := range out {
			out[i] = outcome[R]{err: ErrFailed}
		}
		return out
	}
	m.entries, m.from = m.entries[:0], m.from[:0]
	last := m.applied.Load()
	skipped := 0
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue // configuration changes: Raft's business
		}
		if l.Index <= last {
			skipped++
			continue
		}
		m.entries = append(m.entries, Entry{Index: l.Index, Term: l.Term, Time: l.AppendedAt, Cmd: l.Data})
		m.from = append(m.from, i)
	}
	if skipped > 0 {
		m.metrics.skipped.Add(float64(skipped))
	}
	if len(m.entries) == 0 {
		return out
	}
	lastIndex := m.entries[len(m.entries)-1].Index
	// A leader counts itself in a commit before its own disk holds the
	// entry (behind.go): apply, and so acknowledge, only once it does.
	err := m.durable(lastIndex)
	var res []R
	if err == nil {
		res, err = m.fsm.Apply(m.entries)
	}
	if err == nil && len(res) != len(m.entries) {
		err = fmt.Errorf("state machine returned %d results for %d entries", len(res), len(m.entries))
	}
	if err == nil {
		if got := m.fsm.Applied(); got > lastIndex {
			err = fmt.Errorf("state machine reports applied index %d after applying up to %d", got, lastIndex)
		}
	}
	if err != nil {
		m.fail(err)
		ferr := fmt.Errorf("%w: %w: %w", ErrFailed, ErrUnknownOutcome, err)
		for _, i := range m.from {
			out[i] = outcome[R]{err: ferr}
		}
		return out
	}
	for k, i := range m.from {
		out[i] = outcome[R]{res: res[k]}
	}
	m.applied.Store(lastIndex)
	m.metrics.applied.Add(float64(len(m.entries)))
	m.metrics.batch.Observe(float64(len(m.entries)))
	clear(m.entries) // do not pin commands until the next batch
	return out
}

// Apply applies one log; Raft uses ApplyBatch, this completes raft.FSM.
func (m *machine[R]) Apply(l *raft.Log) any { return m.ApplyBatch([]*raft.Log{l})[0] }

func (m *machine[R]) fail(err error) {
	if m.failed.Swap(true) {
		return
	}
	m.metrics.failures.Inc()
	m.onFail(err)
}

// Snapshot captures the state machine's state and its applied index.
func (m *machine[R]) Snapshot() (raft.FSMSnapshot, error) {
	if m.failed.Load() {
		return nil, ErrFailed
	}
	s, err := m.fsm.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("replication: snapshot: %w", err)
	}
	return &snapshot{applied: m.fsm.Applied(), s: s}, nil
}

// Restore replaces the state machine's state with a snapshot's.
func (m *machine[R]) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	applied, err := readSnapshotHeader(br)
	if err != nil {
		return err
	}
	if err := m.fsm.Restore(br); err != nil {
		return fmt.Errorf("replication: restore snapshot at %d: %w", applied, err)
	}
	if got := m.fsm.Applied(); got != applied {
		err := fmt.Errorf("%w: state machine reports applied index %d after restoring a snapshot taken at %d", ErrCorrupt, got, applied)
		m.fail(err)
		return err
	}
	m.applied.Store(applied)
	m.metrics.restores.Inc()
	return nil
}

// snapshot is a captured FSM state with its applied index.
type snapshot struct {
	applied uint64
	s       Snapshot
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 64<<10)
	_, err := w.Write(appendSnapshotHeader(nil, s.applied))
	if err == nil {
		err = s.s.Persist(w)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("replication: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() { s.s.Release() }

// snapshotApplied reads the applied index recorded in the newest stored
// snapshot (0, false if there is none).
func snapshotApplied(store raft.SnapshotStore) (uint64, bool, error) {
	metas, err := store.List()
	if err != nil {
		return 0, false, fmt.Errorf("replication: list snapshots: %w", err)
	}
	if len(metas) == 0 {
		return 0, false, nil
	}
	_, rc, err := store.Open(metas[0].ID)
	if err != nil {
		return 0, false, fmt.Errorf("replication: open snapshot %s: %w", metas[0].ID, err)
	}
	defer rc.Close()
	applied, err := readSnapshotHeader(rc)
	if err != nil {
		return 0, false, fmt.Errorf("snapshot %s: %w", metas[0].ID, err)
	}
	return applied, true, nil
}

// errIs reports whether err is one of targets.
func errIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
