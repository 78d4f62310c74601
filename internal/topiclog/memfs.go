package topiclog

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// MemFS is an FS in memory that remembers what has been made durable, so
// that CrashClone can show what a crash would leave: a file's data as of its
// last Sync followed by a random prefix of what was written after it (a torn
// write), and a directory's entries as of its last SyncDir. Directories
// themselves are durable once made. Safe for concurrent use.
type MemFS struct {
	mu struct {
		sync.Mutex
		dirs    map[string]bool
		files   map[string]*memFile // current names
		durable map[string]*memFile // names as of each directory's last SyncDir
	}
}

var (
	_ FS   = (*MemFS)(nil)
	_ File = (*memHandle)(nil)
)

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	m := &MemFS{}
	m.mu.dirs = map[string]bool{".": true, string(filepath.Separator): true}
	m.mu.files = map[string]*memFile{}
	m.mu.durable = map[string]*memFile{}
	return m
}

// memFile is a file's contents. Its durable contents are data[:synced],
// unless a truncation or an overwrite reached below synced, after which they
// are the saved copy in durable.
type memFile struct {
	mu struct {
		sync.RWMutex
		data     []byte
		synced   int
		diverged bool
		durable  []byte
	}
}

func (f *memFile) protectDurableLocked(from int) {
	if from < f.mu.synced && !f.mu.diverged {
		f.mu.durable = append([]byte(nil), f.mu.data[:f.mu.synced]...)
		f.mu.diverged = true
	}
}

// crashed returns what a crash leaves of f: its durable contents, plus, if
// only appends followed the last sync, a prefix of the appended bytes of a
// length drawn from rng.
func (f *memFile) crashed(rng *rand.Rand) *memFile {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var data []byte
	if f.mu.diverged {
		data = append(data, f.mu.durable...)
	} else {
		keep := f.mu.synced
		if tail := len(f.mu.data) - f.mu.synced; tail > 0 {
			keep += rng.IntN(tail + 1)
		}
		data = append(data, f.mu.data[:keep]...)
	}
	c := &memFile{}
	c.mu.data = data
	c.mu.synced = len(data)
	return c
}

// CrashClone returns the filesystem a crash at this instant would leave
// (see MemFS); torn tails are drawn from seed. m itself is unchanged and
// its open files stay usable, but the clone shares nothing with it.
func (m *MemFS) CrashClone(seed uint64) *MemFS {
	rng := rand.New(rand.NewPCG(seed, 0x746f7069636c6f67))
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	for d := range m.mu.dirs {
		c.mu.dirs[d] = true
	}
	names := make([]string, 0, len(m.mu.durable))
	for name := range m.mu.durable {
		names = append(names, name)
	}
	sort.Strings(names) // draw from rng in a fixed order
	for _, name := range names {
		f := m.mu.durable[name].crashed(rng)
		c.mu.files[name] = f
		c.mu.durable[name] = f
	}
	return c
}

// ReadFile returns a copy of a file's current contents (for tests and tools).
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	f, ok := m.mu.files[filepath.Clean(name)]
	m.mu.Unlock()
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]byte(nil), f.mu.data...), nil
}

// WriteFile replaces a file's contents and makes them and the file's name
// durable (for tests that damage files).
func (m *MemFS) WriteFile(name string, data []byte) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.dirs[filepath.Dir(name)] {
		return &fs.PathError{Op: "write", Path: name, Err: fs.ErrNotExist}
	}
	f, ok := m.mu.files[name]
	if !ok {
		f = &memFile{}
		m.mu.files[name] = f
	}
	m.mu.durable[name] = f
	f.mu.Lock()
	f.mu.data = append([]byte(nil), data...)
	f.mu.synced = len(data)
	f.mu.diverged = false
	f.mu.durable = nil
	f.mu.Unlock()
	return nil
}

func (m *MemFS) Create(name string) (File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.dirs[filepath.Dir(name)] {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrNotExist}
	}
	f, ok := m.mu.files[name]
	if ok {
		f.mu.Lock()
		f.protectDurableLocked(0)
		f.mu.data = nil
		f.mu.Unlock()
	} else {
		f = &memFile{}
		m.mu.files[name] = f
	}
	return &memHandle{f: f, name: name}, nil
}

func (m *MemFS) Open(name string) (File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.mu.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memHandle{f: f, name: name}, nil
}

func (m *MemFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.files[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.mu.files, name)
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.mu.files[oldname]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	if !m.mu.dirs[filepath.Dir(newname)] {
		return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrNotExist}
	}
	delete(m.mu.files, oldname)
	m.mu.files[newname] = f
	return nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.dirs[dir] {
		return nil, &fs.PathError{Op: "list", Path: dir, Err: fs.ErrNotExist}
	}
	var names []string
	for name := range m.mu.files {
		if filepath.Dir(name) == dir {
			names = append(names, filepath.Base(name))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := filepath.Clean(dir); !m.mu.dirs[d]; d = filepath.Dir(d) {
		m.mu.dirs[d] = true
	}
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.dirs[dir] {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: fs.ErrNotExist}
	}
	for name := range m.mu.durable {
		if filepath.Dir(name) == dir && m.mu.files[name] == nil {
			delete(m.mu.durable, name)
		}
	}
	for name, f := range m.mu.files {
		if filepath.Dir(name) == dir {
			m.mu.durable[name] = f
		}
	}
	return nil
}

// memHandle is an open MemFS file. Like an open file on Unix, it keeps
// working after the file is removed or renamed.
type memHandle struct {
	f      *memFile
	name   string
	closed atomic.Bool
}

func (h *memHandle) check(op string) error {
	if h.closed.Load() {
		return &fs.PathError{Op: op, Path: h.name, Err: fs.ErrClosed}
	}
	return nil
}

func (h *memHandle) ReadAt(p []byte, off int64) (int, error) {
	if err := h.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: h.name, Err: fs.ErrInvalid}
	}
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	if off >= int64(len(h.f.mu.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.f.mu.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *memHandle) WriteAt(p []byte, off int64) (int, error) {
	if err := h.check("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: h.name, Err: fs.ErrInvalid}
	}
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.protectDurableLocked(int(off))
	end := int(off) + len(p)
	if end > len(f.mu.data) {
		if end > cap(f.mu.data) {
			grown := make([]byte, len(f.mu.data), max(end, 2*cap(f.mu.data)))
			copy(grown, f.mu.data)
			f.mu.data = grown
		}
		f.mu.data = f.mu.data[:end]
	}
	copy(f.mu.data[off:], p)
	return len(p), nil
}

func (h *memHandle) Sync() error {
	if err := h.check("sync"); err != nil {
		return err
	}
	f := h.f
	f.mu.Lock()
	f.mu.synced = len(f.mu.data)
	f.mu.diverged = false
	f.mu.durable = nil
	f.mu.Unlock()
	return nil
}

func (h *memHandle) Truncate(size int64) error {
	if err := h.check("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: h.name, Err: fs.ErrInvalid}
	}
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if int(size) <= len(f.mu.data) {
		f.protectDurableLocked(int(size))
		f.mu.data = f.mu.data[:size]
		return nil
	}
	f.mu.data = append(f.mu.data, make([]byte, int(size)-len(f.mu.data))...)
	return nil
}

func (h *memHandle) Size() (int64, error) {
	if err := h.check("stat"); err != nil {
		return 0, err
	}
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	return int64(len(h.f.mu.data)), nil
}

func (h *memHandle) Close() error {
	if h.closed.Swap(true) {
		return &fs.PathError{Op: "close", Path: h.name, Err: fs.ErrClosed}
	}
	return nil
}

func (h *memHandle) String() string { return fmt.Sprintf("memfile(%s)", h.name) }
