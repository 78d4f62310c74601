package sequencer

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// A snapshot is the dedup table followed by the topic log's snapshot:
//
//	magic "SXSQ" | version=1 | applied uint64 | table length uint64 | table | crc uint32 = CRC-32C(table)
//	| the topic log's snapshot stream (topiclog.Snapshot.WriteTo)
//
// integers little-endian; the table's encoding is in dedup.go.

var snapMagic = [4]byte{'S', 'X', 'S', 'Q'}

const (
	snapVersion   = 1
	snapHeaderLen = 4 + 1 + 8 + 8
	// maxTableBytes bounds a snapshot's table; a table holds at most
	// Horizon entries of at most a client id and five varints each.
	maxTableBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is a captured state (replication.Snapshot's methods): Persist
// writes it, Release lets its log files go.
type Snapshot struct {
	applied uint64
	table   []byte
	log     *topiclog.Snapshot
}

// Snapshot captures the state: the dedup table (encoded now, so Apply may
// go on) and a reference to the log's files (topiclog.Log.Snapshot).
func (s *Sequencer) Snapshot() (*Snapshot, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	ls, err := s.log.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("sequencer: snapshot: %w", err)
	}
	return &Snapshot{applied: s.applied.Load(), table: s.table.appendTo(nil, s.horizon), log: ls}, nil
}

// Persist writes the snapshot; it runs concurrently with Apply.
func (sn *Snapshot) Persist(w io.Writer) error {
	if err := sn.writeHeader(w); err != nil {
		return fmt.Errorf("sequencer: write snapshot: %w", err)
	}
	if _, err := sn.log.WriteTo(w); err != nil {
		return fmt.Errorf("sequencer: write snapshot: %w", err)
	}
	return nil
}

// writeHeader writes everything before the log's stream.
func (sn *Snapshot) writeHeader(w io.Writer) error {
	b := make([]byte, 0, snapHeaderLen+len(sn.table)+4)
	b = append(b, snapMagic[:]...)
	b = append(b, snapVersion)
	b = binary.LittleEndian.AppendUint64(b, sn.applied)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(sn.table)))
	b = append(b, sn.table...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(sn.table, castagnoli))
	_, err := w.Write(b)
	return err
}

// Release lets the snapshot's log files go.
func (sn *Snapshot) Release() { sn.log.Release() }

// readSnapshotTable reads a snapshot's header and table, leaving r at the
// log's stream.
func readSnapshotTable(r io.Reader) (applied uint64, t *table, horizon uint64, err error) {
	var hdr [snapHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, 0, fmt.Errorf("%w: snapshot header: %w", ErrCorrupt, err)
	}
	if [4]byte(hdr[:4]) != snapMagic || hdr[4] != snapVersion {
		return 0, nil, 0, fmt.Errorf("%w: not a version %d sequencer snapshot", ErrCorrupt, snapVersion)
	}
	applied = binary.LittleEndian.Uint64(hdr[5:])
	n := binary.LittleEndian.Uint64(hdr[13:])
	if n > maxTableBytes {
		return 0, nil, 0, fmt.Errorf("%w: snapshot table of %d bytes", ErrCorrupt, n)
	}
	// Read without trusting n for the allocation: a stream that announces
	// a large table must also hold it.
	b, err := io.ReadAll(io.LimitReader(r, int64(n)+4))
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%w: snapshot table: %w", ErrCorrupt, err)
	}
	if uint64(len(b)) != n+4 {
		return 0, nil, 0, fmt.Errorf("%w: snapshot ends inside its table", ErrCorrupt)
	}
	if crc32.Checksum(b[:n], castagnoli) != binary.LittleEndian.Uint32(b[n:]) {
		return 0, nil, 0, fmt.Errorf("%w: snapshot table checksum", ErrCorrupt)
	}
	t, horizon, err = decodeTable(b[:n])
	if err != nil {
		return 0, nil, 0, err
	}
	return applied, t, horizon, nil
}

// Restore replaces the state with a snapshot's: the dedup table and the
// topic log (topiclog.Log.Restore: all old or all new, even across a
// crash). A damaged stream leaves the state as it was.
func (s *Sequencer) Restore(r io.Reader) error {
	applied, t, horizon, err := readSnapshotTable(r)
	if err != nil {
		return fmt.Errorf("sequencer: restore: %w", err)
	}
	if horizon != s.horizon {
		return fmt.Errorf("sequencer: restore: %w: snapshot kept under a dedup horizon of %d records, this replica uses %d", ErrInvalid, horizon, s.horizon)
	}
	// Empty before the log changes: a read from then on goes to the log,
	// old or new.
	s.recent.clear()
	if err := s.log.Restore(r); err != nil {
		return fmt.Errorf("sequencer: restore: %w", err)
	}
	defer s.notify()
	next, last := s.log.NextSeq(), uint64(0)
	t.entries(func(_ dedupKey, e dedupEntry) { last = max(last, e.seq) })
	if last >= next || applied < s.log.LastMark() {
		// The table or the applied index does not fit the log that came
		// with it. The log is the record: reopening rebuilds the table
		// from it.
		return s.fail(fmt.Errorf("restore: %w: table up to position %d, applied index %d; the log ends before position %d at mark %d",
			ErrCorrupt, last, applied, next, s.log.LastMark()))
	}
	s.table = t
	s.evict()
	s.applied.Store(applied)
	return nil
}
