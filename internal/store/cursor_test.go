package store

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func cursorsOf(t *testing.T, s *Store, client string) []CursorRecord {
	t.Helper()
	var out []CursorRecord
	found := false
	if err := s.LoadSessions(func(r *SessionRecord) error {
		if r.ClientID == client {
			out, found = r.Cursors, true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("no session %q", client)
	}
	return out
}

// TestCursors: PutCursor records a session's position on a group, which
// LoadSessions returns in its record (over the record's own, across a
// reopen); a lower position does not move it back; PutSession replaces
// them by the record's; DeleteSession removes them.
func TestCursors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s := openStore(t, path, Options{Fsync: FsyncNever})
	rec := &SessionRecord{ClientID: "c", Version: 5, ExpiryInterval: 60, Cursors: []CursorRecord{{Group: "g/b", Seq: 3}}}
	commit(t, s, func(b *Batch) { b.PutSession(rec) })
	commit(t, s, func(b *Batch) {
		b.PutCursor("c", "g/b", 7)
		b.PutCursor("c", "g/a", 2)
		b.PutCursor("c", "g/a", 9)
	})
	commit(t, s, func(b *Batch) { b.PutCursor("c", "g/a", 5) }) // committed after a higher one
	want := []CursorRecord{{Group: "g/a", Seq: 9}, {Group: "g/b", Seq: 7}}
	if got := cursorsOf(t, s, "c"); !slices.Equal(got, want) {
		t.Fatalf("cursors %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path, Options{Fsync: FsyncNever})
	if got := cursorsOf(t, s, "c"); !slices.Equal(got, want) {
		t.Fatalf("after reopening: cursors %v, want %v", got, want)
	}

	// The session's record, written later, holds its cursors now (one
	// moved back by a replay from an older position): they replace the
	// ones put before it; one put after it goes over it.
	rec.Cursors = []CursorRecord{{Group: "g/a", Seq: 4}}
	commit(t, s, func(b *Batch) {
		b.PutCursor("c", "g/a", 10)
		b.PutSession(rec)
	})
	if got, want := cursorsOf(t, s, "c"), rec.Cursors; !slices.Equal(got, want) {
		t.Fatalf("after PutSession: cursors %v, want %v", got, want)
	}
	commit(t, s, func(b *Batch) { b.PutCursor("c", "g/a", 6) })
	if got, want := cursorsOf(t, s, "c"), []CursorRecord{{Group: "g/a", Seq: 6}}; !slices.Equal(got, want) {
		t.Fatalf("after PutSession and PutCursor: cursors %v, want %v", got, want)
	}

	commit(t, s, func(b *Batch) { b.DeleteSession("c") })
	if err := s.view(func(tx *bolt.Tx) error {
		if bucketAt(tx, [][]byte{bucketCursors, []byte("c")}) != nil {
			t.Error("DeleteSession left the session's cursors")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	for name, fill := range map[string]func(*Batch){
		"seq 0":    func(b *Batch) { b.PutCursor("c", "g", 0) },
		"no group": func(b *Batch) { b.PutCursor("c", "", 1) },
		"no id":    func(b *Batch) { b.PutCursor("", "g", 1) },
	} {
		var b Batch
		fill(&b)
		if !errors.Is(b.Err(), ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, b.Err())
		}
	}
}
