package topiclog

import (
	"errors"
	"fmt"
)

// Op names an FS or File operation, for ErrorFS.
type Op uint8

const (
	OpCreate Op = iota
	OpOpen
	OpRemove
	OpRename
	OpList
	OpMkdirAll
	OpSyncDir
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpSize
	OpClose
)

var opNames = [...]string{"create", "open", "remove", "rename", "list", "mkdirall", "syncdir", "read", "write", "sync", "truncate", "size", "close"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ErrInjected is the error an injector returns by convention; ErrorFS wraps
// whatever it returns with the operation and name.
var ErrInjected = errors.New("topiclog: injected fault")

// ErrorFS wraps an FS and fails the operations its Inject function picks.
// Inject is called before every operation (from any goroutine: it must be
// safe for concurrent use); a non-nil error fails the operation. A failed
// OpWrite first writes the first half of its bytes, as a short write would.
type ErrorFS struct {
	FS     FS
	Inject func(op Op, name string) error
}

var (
	_ FS   = (*ErrorFS)(nil)
	_ File = (*errorFile)(nil)
)

func (e *ErrorFS) inject(op Op, name string) error {
	if e.Inject == nil {
		return nil
	}
	if err := e.Inject(op, name); err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	return nil
}

func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.inject(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, fs: e, name: name}, nil
}

func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.inject(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, fs: e, name: name}, nil
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.inject(OpRemove, name); err != nil {
		return err
	}
	return e.FS.Remove(name)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.inject(OpRename, oldname); err != nil {
		return err
	}
	return e.FS.Rename(oldname, newname)
}

func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.inject(OpList, dir); err != nil {
		return nil, err
	}
	return e.FS.List(dir)
}

func (e *ErrorFS) MkdirAll(dir string) error {
	if err := e.inject(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.FS.MkdirAll(dir)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.inject(OpSyncDir, dir); err != nil {
		return err
	}
	return e.FS.SyncDir(dir)
}

type errorFile struct {
	f    File
	fs   *ErrorFS
	name string
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.inject(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.inject(OpWrite, f.name); err != nil {
		n, _ := f.f.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.f.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.inject(OpSync, f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.inject(OpTruncate, f.name); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Size() (int64, error) {
	if err := f.fs.inject(OpSize, f.name); err != nil {
		return 0, err
	}
	return f.f.Size()
}

func (f *errorFile) Close() error {
	if err := f.fs.inject(OpClose, f.name); err != nil {
		f.f.Close() // release the file anyway: a failed close still closes
		return err
	}
	return f.f.Close()
}
