package topiclog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync/atomic"
)

// A snapshot stream is the log's segment files, verbatim:
//
//	magic   [8]byte "SXTLSNAP"
//	version byte    1
//	count   uint32  number of segments (>= 1)
//	count times:
//	  first uint64  the segment's first position
//	  size  uint64  bytes that follow
//	  data  [size]byte
//	  crc   uint32  CRC-32C of data
//
// all little-endian. Restore writes the segments back under their names, so
// a restored replica's files are byte-identical to the source's.

var snapMagic = [8]byte{'S', 'X', 'T', 'L', 'S', 'N', 'A', 'P'}

const (
	snapVersion = 1
	// maxSnapSegment bounds a segment's declared size in a stream.
	maxSnapSegment = MaxSegmentBytes + MaxBatchBytes + 1<<30
)

// Snapshot is a point-in-time view of a log: the segment files and the size
// each had when it was taken. Appends and retention may go on meanwhile:
// the snapshot holds references that keep its files open. Release it when
// done. A Snapshot is used by one goroutine.
type Snapshot struct {
	segs     []snapSeg
	next     uint64
	lastMark uint64
	released atomic.Bool
}

type snapSeg struct {
	seg  *segment
	size int64
}

// Snapshot captures the log's state without copying it (for a Raft FSM's
// Snapshot, which must return quickly; WriteTo is its Persist).
func (l *Log) Snapshot() (*Snapshot, error) {
	if err := l.rlock(); err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	s := &Snapshot{next: l.mu.next, lastMark: l.mu.lastMark}
	for _, seg := range l.mu.segs {
		seg.acquire()
		s.segs = append(s.segs, snapSeg{seg: seg, size: seg.size})
	}
	return s, nil
}

// NextSeq is the position the next record got after the snapshot.
func (s *Snapshot) NextSeq() uint64 { return s.next }

// LastMark is the mark of the last record in the snapshot.
func (s *Snapshot) LastMark() uint64 { return s.lastMark }

// Release lets the snapshot's files go. It may be called more than once.
func (s *Snapshot) Release() {
	if s.released.Swap(true) {
		return
	}
	for _, ss := range s.segs {
		ss.seg.release()
	}
}

// WriteTo writes the snapshot stream to w.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	if s.released.Load() {
		return 0, fmt.Errorf("topiclog: snapshot: %w", ErrClosed)
	}
	cw := &countWriter{w: w}
	hdr := append(snapMagic[:], snapVersion)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(s.segs)))
	if _, err := cw.Write(hdr); err != nil {
		return cw.n, err
	}
	buf := make([]byte, 256<<10)
	for _, ss := range s.segs {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:], ss.seg.first)
		binary.LittleEndian.PutUint64(b[8:], uint64(ss.size))
		if _, err := cw.Write(b[:]); err != nil {
			return cw.n, err
		}
		crc := uint32(0)
		for off := int64(0); off < ss.size; {
			chunk := buf[:min(int64(len(buf)), ss.size-off)]
			if _, err := ss.seg.file.ReadAt(chunk, off); err != nil {
				return cw.n, fmt.Errorf("topiclog: snapshot: read %s: %w", ss.seg.path, err)
			}
			crc = crc32.Update(crc, castagnoli, chunk)
			if _, err := cw.Write(chunk); err != nil {
				return cw.n, err
			}
			off += int64(len(chunk))
		}
		if _, err := cw.Write(binary.LittleEndian.AppendUint32(nil, crc)); err != nil {
			return cw.n, err
		}
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Restore replaces the log's contents with a snapshot stream (a Raft FSM's
// Restore: a lagging replica installs its leader's state). It writes the
// stream's segments under temporary names, verifies them as strictly as
// Open would (no torn tail accepted: a damaged stream fails with
// ErrCorrupt and leaves the log as it was), then swaps them in. A crash
// during the swap is finished by the next Open, so the log is either all
// old or all new. Reads in progress finish on the old files; reads after
// Restore returns see the new contents.
func (l *Log) Restore(r io.Reader) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w.closed {
		return ErrClosed
	}
	if l.w.failed != nil {
		return fmt.Errorf("topiclog: restore: %w", l.w.failed)
	}
	if err := discardStaging(l.fs, l.dir); err != nil {
		return fmt.Errorf("topiclog: restore: %w", err)
	}
	firsts, err := l.stage(bufio.NewReaderSize(r, 256<<10))
	if err != nil {
		_ = discardStaging(l.fs, l.dir)
		return fmt.Errorf("topiclog: restore: %w", err)
	}
	ld := loader{fs: l.fs, dir: l.dir, prefix: stagingPrefix, log: l.log}
	st, err := ld.load(firsts)
	if err != nil {
		_ = discardStaging(l.fs, l.dir)
		return fmt.Errorf("topiclog: restore: %w", err)
	}
	// The commit point: a synced marker naming the new segments.
	if err := writeMarker(l.fs, l.dir, firsts); err != nil {
		for _, s := range st.segs {
			s.release()
		}
		// The marker may have been renamed into place; left there with its
		// staging files gone it would make the next Open drop the log.
		rerr := l.fs.Remove(join(l.dir, markerName))
		if rerr == nil || notExist(rerr) {
			rerr = discardStaging(l.fs, l.dir)
		}
		if rerr != nil {
			l.w.failed = fmt.Errorf("%w: restore: %w", ErrFailed, err)
			return l.w.failed
		}
		return fmt.Errorf("topiclog: restore: %w", err)
	}
	for _, s := range st.segs {
		s.path = join(l.dir, segName(s.first)) // open handles follow the rename
	}
	l.mu.Lock()
	old := l.mu.segs
	l.mu.state = st
	l.mu.Unlock()
	for _, s := range old {
		s.release()
	}
	if _, err := settleRestore(l.fs, l.dir); err != nil {
		// Committed but not swapped on disk: the next Open finishes it.
		// Until then the files do not match what readers see.
		l.w.failed = fmt.Errorf("%w: restore: %w", ErrFailed, err)
		return l.w.failed
	}
	return nil
}

// stage copies the stream's segments into staging files, synced, and
// returns their first positions.
func (l *Log) stage(r io.Reader) ([]uint64, error) {
	var hdr [13]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: snapshot header: %w", ErrCorrupt, err)
	}
	if [8]byte(hdr[:8]) != snapMagic || hdr[8] != snapVersion {
		return nil, fmt.Errorf("%w: not a topic log snapshot", ErrCorrupt)
	}
	count := binary.LittleEndian.Uint32(hdr[9:])
	if count == 0 {
		return nil, fmt.Errorf("%w: snapshot without segments", ErrCorrupt)
	}
	var firsts []uint64
	buf := make([]byte, 256<<10)
	for range count {
		var b [16]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("%w: snapshot segment header: %w", ErrCorrupt, err)
		}
		first, size := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
		if size > maxSnapSegment || len(firsts) > 0 && first <= firsts[len(firsts)-1] {
			return nil, fmt.Errorf("%w: snapshot segment %d of %d bytes", ErrCorrupt, first, size)
		}
		path := join(l.dir, stagingPrefix+segName(first))
		f, err := l.fs.Create(path)
		if err != nil {
			return nil, err
		}
		firsts = append(firsts, first)
		crc := uint32(0)
		for off := int64(0); off < int64(size); {
			chunk := buf[:min(int64(len(buf)), int64(size)-off)]
			if _, err := io.ReadFull(r, chunk); err != nil {
				f.Close()
				return nil, fmt.Errorf("%w: snapshot segment %d: %w", ErrCorrupt, first, err)
			}
			crc = crc32.Update(crc, castagnoli, chunk)
			if _, err := f.WriteAt(chunk, off); err != nil {
				f.Close()
				return nil, err
			}
			off += int64(len(chunk))
		}
		var c [4]byte
		if _, err := io.ReadFull(r, c[:]); err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: snapshot segment %d checksum: %w", ErrCorrupt, first, err)
		}
		if binary.LittleEndian.Uint32(c[:]) != crc {
			f.Close()
			return nil, fmt.Errorf("%w: snapshot segment %d: checksum mismatch", ErrCorrupt, first)
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return nil, err
	}
	return firsts, nil
}

// The restore marker is a frame whose body is 'M' and the new segments'
// first positions (uint64 each). It is written under a temporary name,
// synced and renamed into place: its presence is the commit point.

func writeMarker(fsys FS, dir string, firsts []uint64) error {
	buf, start := beginFrame(nil)
	buf = append(buf, 'M')
	for _, f := range firsts {
		buf = binary.LittleEndian.AppendUint64(buf, f)
	}
	buf = finishFrame(buf, start)
	tmp := join(dir, markerTmp)
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := fsys.Rename(tmp, join(dir, markerName)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

func readMarker(fsys FS, dir string) ([]uint64, error) {
	f, err := fsys.Open(join(dir, markerName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > 1<<26 {
		return nil, fmt.Errorf("%w: restore marker of %d bytes", ErrCorrupt, size)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	body, n, err := parseFrame(buf)
	if err != nil || n != len(buf) || len(body) < 1 || body[0] != 'M' || (len(body)-1)%8 != 0 {
		return nil, fmt.Errorf("%w: restore marker", ErrCorrupt)
	}
	var firsts []uint64
	for b := body[1:]; len(b) > 0; b = b[8:] {
		firsts = append(firsts, binary.LittleEndian.Uint64(b))
	}
	return firsts, nil
}

// settleRestore finishes a committed restore (a marker exists: remove the
// segments it does not name, rename the staged ones into place, remove the
// marker) or discards an uncommitted one's staging files. It is idempotent,
// so a crash during it is finished by the next Open. It reports whether it
// finished a committed restore.
func settleRestore(fsys FS, dir string) (bool, error) {
	firsts, err := readMarker(fsys, dir)
	if notExist(err) {
		return false, discardStaging(fsys, dir)
	}
	if err != nil {
		return false, err
	}
	keep := map[string]bool{}
	for _, f := range firsts {
		keep[segName(f)] = true
	}
	names, err := fsys.List(dir)
	if err != nil {
		return false, err
	}
	present := map[string]bool{}
	for _, name := range names {
		present[strings.TrimPrefix(name, stagingPrefix)] = true
	}
	for name := range keep {
		if !present[name] {
			return false, fmt.Errorf("%w: restore marker names %s, which is missing", ErrCorrupt, name)
		}
	}
	for _, name := range names {
		if _, ok := parseSegName(name); ok && !keep[name] {
			if err := fsys.Remove(join(dir, name)); err != nil {
				return false, err
			}
		}
	}
	for _, name := range names {
		if final, ok := strings.CutPrefix(name, stagingPrefix); ok && keep[final] {
			if err := fsys.Rename(join(dir, name), join(dir, final)); err != nil {
				return false, err
			}
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return false, err
	}
	if err := fsys.Remove(join(dir, markerName)); err != nil {
		return false, err
	}
	return true, fsys.SyncDir(dir)
}

// discardStaging removes the files of an uncommitted restore.
func discardStaging(fsys FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	found := false
	for _, name := range names {
		if strings.HasPrefix(name, stagingPrefix) || name == markerTmp {
			if err := fsys.Remove(join(dir, name)); err != nil {
				return err
			}
			found = true
		}
	}
	if found {
		return fsys.SyncDir(dir)
	}
	return nil
}
