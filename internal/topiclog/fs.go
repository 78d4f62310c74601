package topiclog

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// FS is what the log needs from a filesystem: flat directories of files
// that are appended to, read at offsets, truncated, synced, renamed and
// removed. Names are paths (the log joins its directory and a file name with
// filepath.Join). Implementations: OSFS, MemFS (in memory, crashable) and
// ErrorFS (injects failures into another FS).
//
// Durability contract, which MemFS.CrashClone models and the log relies on:
// a file's data is durable once File.Sync returns; a file's existence, a
// rename and a removal are durable once SyncDir of its directory returns.
type FS interface {
	// Create creates the named file, truncating it if it exists, open for
	// reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file for reading and writing.
	Open(name string) (File, error)
	Remove(name string) error
	// Rename renames oldname to newname, replacing newname if it exists.
	Rename(oldname, newname string) error
	// List returns the names (not paths) of the files in dir, sorted.
	List(dir string) ([]string, error)
	MkdirAll(dir string) error
	// SyncDir makes the creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// File is an open file. ReadAt may run concurrently with WriteAt on other
// regions, with other ReadAt calls and with Sync.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// OSFS is the operating system's filesystem.
type OSFS struct{}

var (
	_ FS   = OSFS{}
	_ File = osFile{}
)

// osFile adds Size to *os.File.
type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (OSFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Remove(name string) error { return os.Remove(name) }

func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (OSFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func (OSFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// notExist reports a missing file in any FS implementation.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func join(dir, name string) string { return filepath.Join(dir, name) }
