//go:build linux

package replication

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
	"golang.org/x/sys/unix"
)

// directBlock is the alignment of direct I/O: offsets, lengths and buffer
// addresses are multiples of it. 4 KiB covers devices with 512-byte and
// 4 KiB logical blocks.
const directBlock = 4096

// directFS is the file system of a group's Raft log: raft-wal's, except
// that the segment being written goes around the page cache (O_DIRECT).
//
// Why: every append to the log is fsynced before Raft counts it, so the
// page cache only adds a copy of each batch into freshly allocated cache
// pages, which the fsync then writes out. With direct I/O the batch is
// written from the log's own buffer and the fsync only flushes the device
// and the file's metadata. Reads, of sealed segments and of the one being
// written, go through the page cache as before: raft-wal reads a segment
// frame header by frame header when it recovers the tail, which direct reads
// would make one device read each. On a file system that refuses O_DIRECT
// (tmpfs on older kernels) the file is opened as raft-wal opens it.
type directFS struct{ base *walfs.FS }

var _ types.VFS = directFS{}

func newDirectFS() directFS { return directFS{base: walfs.New()} }

func (d directFS) ListDir(dir string) ([]string, error) { return d.base.ListDir(dir) }

func (d directFS) Delete(dir, name string) error { return d.base.Delete(dir, name) }

func (d directFS) OpenReader(dir, name string) (types.ReadableFile, error) {
	return d.base.OpenReader(dir, name)
}

// Create creates a segment, preallocated to size (its content reads as
// zeros), opened for direct I/O.
func (d directFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("replication: segment of %d bytes", size)
	}
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EINVAL) {
		return d.base.Create(dir, name, size)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	r, err := os.Open(path)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if size > 0 {
		if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
			// Best effort, as raft-wal's own: a file system without
			// fallocate gets a sparse file of that size.
			if err := f.Truncate(int64(size)); err != nil {
				_ = f.Close()
				_ = r.Close()
				return nil, err
			}
		}
	}
	// New: its directory entry is synced with the first Sync, and every
	// byte not written yet is known to read as zero.
	return &directFile{f: f, r: r, dir: dir, syncDir: true, zeroFrom: 0, tailAt: -1}, nil
}

// OpenWriter opens an existing segment (the tail, after a restart) for
// direct I/O. What it holds past the written part is unknown, so partial
// blocks are read before they are rewritten.
func (d directFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EINVAL) {
		return d.base.OpenWriter(dir, name)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	r, err := os.Open(path)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &directFile{f: f, r: r, dir: dir, zeroFrom: math.MaxInt64, tailAt: -1}, nil
}

// directFile is a segment open for direct I/O. Writes are read-modify-write
// of whole blocks: the block holding the end of the last write is kept
// (tail), so that appends, raft-wal's only writes, never read the disk.
type directFile struct {
	f   *os.File // O_DIRECT, for writes
	r   *os.File // through the page cache, for reads (a direct write drops the cached pages it covers)
	dir string

	mu       sync.Mutex
	syncDir  bool   // the first Sync also syncs the directory (a new file)
	zeroFrom int64  // bytes from here on are known to read as zero
	tail     []byte // the block at tailAt as on disk (tailAt -1: none)
	tailAt   int64
	buf      []byte // the aligned write buffer, reused
}

var _ types.WritableFile = (*directFile)(nil)

// alignedBuf returns n bytes (a multiple of directBlock) at an aligned
// address.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directBlock)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (directBlock - 1))
	if off != 0 {
		off = directBlock - off
	}
	return b[off : off+n : off+n]
}

// block fills dst (one block) with the file's content at at (aligned).
func (d *directFile) block(dst []byte, at int64) error {
	switch {
	case at == d.tailAt:
		copy(dst, d.tail)
		return nil
	case at >= d.zeroFrom:
		clear(dst)
		return nil
	}
	n, err := d.f.ReadAt(dst, at)
	if err == io.EOF {
		clear(dst[n:])
		err = nil
	}
	return err
}

// WriteAt writes p at off through whole aligned blocks.
func (d *directFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("replication: write at %d", off)
	}
	if len(p) == 0 {
		return 0, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	start := off &^ (directBlock - 1)
	end := off + int64(len(p))
	aend := (end + directBlock - 1) &^ (directBlock - 1)
	n := int(aend - start)
	if cap(d.buf) < n {
		d.buf = alignedBuf(n + n/4&^(directBlock-1))
	}
	w := d.buf[:n]
	if off > start {
		if err := d.block(w[:directBlock], start); err != nil {
			return 0, err
		}
	}
	if last := aend - directBlock; end < aend && (last != start || off == start) {
		if err := d.block(w[n-directBlock:], last); err != nil {
			return 0, err
		}
	}
	copy(w[off-start:], p)
	if _, err := d.f.WriteAt(w, start); err != nil {
		d.tailAt = -1 // what reached the disk is unknown
		return 0, err
	}
	if d.tail == nil {
		d.tail = alignedBuf(directBlock)
	}
	copy(d.tail, w[n-directBlock:])
	d.tailAt = aend - directBlock
	if aend > d.zeroFrom {
		d.zeroFrom = aend
	}
	return len(p), nil
}

// ReadAt reads through the page cache.
func (d *directFile) ReadAt(p []byte, off int64) (int, error) { return d.r.ReadAt(p, off) }

// Sync makes the written blocks and the file's size durable (the data
// went to the device with each write).
func (d *directFile) Sync() error {
	if err := unix.Fdatasync(int(d.f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: d.f.Name(), Err: err}
	}
	d.mu.Lock()
	syncDir := d.syncDir
	d.mu.Unlock()
	if !syncDir {
		return nil
	}
	dir, err := os.Open(d.dir)
	if err != nil {
		return err
	}
	err = dir.Sync()
	if cerr := dir.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		d.mu.Lock()
		d.syncDir = false
		d.mu.Unlock()
	}
	return err
}

func (d *directFile) Close() error {
	err := d.f.Close()
	if rerr := d.r.Close(); err == nil {
		err = rerr
	}
	return err
}
