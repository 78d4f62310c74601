package topiclog

import (
	"bytes"
	"errors"
	"io/fs"
	"slices"
	"testing"
)

func memWrite(t *testing.T, f File, off int64, s string) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func memContents(t *testing.T, m *MemFS, name string) string {
	t.Helper()
	b, err := m.ReadFile(name)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestMemFSCrashKeepsSyncedDataAndATornPrefix(t *testing.T) {
	m := NewMemFS()
	f, err := m.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	memWrite(t, f, 0, "synced|")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	memWrite(t, f, 7, "unsynced")
	prefixes := map[string]bool{}
	for seed := range uint64(64) {
		got := memContents(t, m.CrashClone(seed), "a")
		if got[:7] != "synced|" || !bytes.HasPrefix([]byte("synced|unsynced"), []byte(got)) {
			t.Fatalf("after a crash: %q", got)
		}
		prefixes[got] = true
	}
	if len(prefixes) < 4 || !prefixes["synced|"] {
		t.Fatalf("crashes left only %v: want torn prefixes of every length, including none", prefixes)
	}
	// The original is untouched.
	if got := memContents(t, m, "a"); got != "synced|unsynced" {
		t.Fatalf("original: %q", got)
	}
}

func TestMemFSNamesAreDurableOnlyAfterSyncDir(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"d/old", "d/gone", "d/moved"} {
		f, _ := m.Create(n)
		memWrite(t, f, 0, n)
		f.Sync()
	}
	m.SyncDir("d")
	f, _ := m.Create("d/new")
	memWrite(t, f, 0, "new")
	f.Sync() // data synced, name not
	if err := m.Remove("d/gone"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("d/moved", "d/renamed"); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone(1)
	names, _ := c.List("d")
	if want := []string{"gone", "moved", "old"}; !slices.Equal(names, want) {
		t.Fatalf("after a crash before SyncDir: %v, want %v", names, want)
	}
	m.SyncDir("d")
	names, _ = m.CrashClone(1).List("d")
	if want := []string{"new", "old", "renamed"}; !slices.Equal(names, want) {
		t.Fatalf("after a crash after SyncDir: %v, want %v", names, want)
	}
	if got := memContents(t, m.CrashClone(1), "d/renamed"); got != "d/moved" {
		t.Fatalf("renamed file holds %q", got)
	}
}

func TestMemFSTruncationIsDurableOnlyAfterSync(t *testing.T) {
	m := NewMemFS()
	f, _ := m.Create("a")
	m.SyncDir(".")
	memWrite(t, f, 0, "0123456789")
	f.Sync()
	f.Truncate(4)
	memWrite(t, f, 4, "xy")
	if got := memContents(t, m.CrashClone(3), "a"); got != "0123456789" {
		t.Fatalf("crash after an unsynced truncate: %q, want the synced contents", got)
	}
	f.Sync()
	if got := memContents(t, m.CrashClone(3), "a"); got != "0123xy" {
		t.Fatalf("crash after a synced truncate: %q", got)
	}
}

func TestMemFSHandlesOutliveRemoval(t *testing.T) {
	m := NewMemFS()
	f, _ := m.Create("a")
	memWrite(t, f, 0, "data")
	if err := m.Remove("a"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "data" {
		t.Fatalf("read after remove: %q %v", buf, err)
	}
	if _, err := m.Open("a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open after remove: %v", err)
	}
	f.Close()
	if _, err := f.ReadAt(buf, 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := m.Create("nodir/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in a missing directory: %v", err)
	}
}

func TestErrorFSShortWrite(t *testing.T) {
	m := NewMemFS()
	fail := false
	e := &ErrorFS{FS: m, Inject: func(op Op, name string) error {
		if fail && op == OpWrite {
			return ErrInjected
		}
		return nil
	}}
	f, err := e.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	fail = true
	n, err := f.WriteAt([]byte("abcdef"), 0)
	if !errors.Is(err, ErrInjected) || n != 3 || memContents(t, m, "a") != "abc" {
		t.Fatalf("injected write: %d %v, file %q", n, err, memContents(t, m, "a"))
	}
}
