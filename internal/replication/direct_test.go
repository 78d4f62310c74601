//go:build linux

package replication

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// TestDirectFileMatchesBufferedFile writes the same seeded sequence of
// writes (appends, as raft-wal makes, and writes anywhere, of any length)
// through a direct file and through raft-wal's own file, reopening the
// direct one part way (its content past the writes then unknown), and
// checks both read back the same bytes, whole and in random ranges.
func TestDirectFileMatchesBufferedFile(t *testing.T) {
	r := rng(testSeed(t))
	dir := t.TempDir()
	const size = 256 << 10
	plain, err := walfs.New().Create(dir, "plain", size)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	fs := newDirectFS()
	direct, err := fs.Create(dir, "direct", size)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { direct.Close() }()
	if _, ok := direct.(*directFile); !ok {
		t.Logf("the temporary directory's file system refuses O_DIRECT: the buffered fallback is checked")
	}
	end := int64(0)
	for i := 0; i < 400; i++ {
		var off int64
		n := 1 + r.IntN(3*directBlock)
		if r.IntN(4) == 0 {
			off = r.Int64N(size - int64(n))
		} else {
			off = end
			if off+int64(n) > size {
				off, end = 0, 0
			}
		}
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		for name, f := range map[string]types.WritableFile{"plain": plain, "direct": direct} {
			if got, err := f.WriteAt(p, off); err != nil || got != n {
				t.Fatalf("write %d: %s WriteAt(%d bytes at %d) = %d, %v", i, name, n, off, got, err)
			}
		}
		if off+int64(n) > end {
			end = off + int64(n)
		}
		if i == 200 {
			if err := direct.Sync(); err != nil {
				t.Fatal(err)
			}
			direct.Close()
			if direct, err = fs.OpenWriter(dir, "direct"); err != nil {
				t.Fatal(err)
			}
		}
		if i%50 == 0 {
			compareRange(t, plain, direct, 0, size)
		}
		o := r.Int64N(size)
		compareRange(t, plain, direct, o, 1+r.Int64N(size-o))
	}
	if err := direct.Sync(); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "plain"))
	got, _ := os.ReadFile(filepath.Join(dir, "direct"))
	if !bytes.Equal(got, want) {
		t.Fatal("the direct file's bytes on disk differ from the buffered file's")
	}
}

func compareRange(t *testing.T, a, b types.WritableFile, off, n int64) {
	t.Helper()
	pa, pb := make([]byte, n), make([]byte, n)
	na, ea := a.ReadAt(pa, off)
	nb, eb := b.ReadAt(pb, off)
	if na != nb || (ea == nil) != (eb == nil) || !bytes.Equal(pa[:na], pb[:nb]) {
		t.Fatalf("ReadAt(%d bytes at %d): buffered %d, %v; direct %d, %v; equal %v", n, off, na, ea, nb, eb, bytes.Equal(pa[:na], pb[:nb]))
	}
}

// TestDirectLogReopens stores entries in a raft-wal log on the direct file
// system across several segments, then reads every one back after reopening
// it on the direct file system and on raft-wal's own: the files are the
// same format.
func TestDirectLogReopens(t *testing.T) {
	r := rng(testSeed(t))
	dir := t.TempDir()
	open := func(vfs types.VFS) *wal.WAL {
		t.Helper()
		w, err := wal.Open(dir, wal.WithSegmentSize(64<<10), wal.WithSegmentFiler(segment.NewFiler(dir, vfs)))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open(newDirectFS())
	var want [][]byte
	for idx := uint64(1); idx <= 300; {
		var batch []*raft.Log
		for k := 0; k < 1+r.IntN(8); k++ {
			data := make([]byte, r.IntN(3000))
			for j := range data {
				data[j] = byte(r.Uint32())
			}
			batch = append(batch, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
			want = append(want, data)
			idx++
		}
		if err := w.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	check := func(w *wal.WAL, name string) {
		t.Helper()
		for i, data := range want {
			var l raft.Log
			if err := w.GetLog(uint64(i+1), &l); err != nil {
				t.Fatalf("%s: GetLog(%d): %v", name, i+1, err)
			}
			if !bytes.Equal(l.Data, data) {
				t.Fatalf("%s: entry %d differs", name, i+1)
			}
		}
	}
	check(w, "written")
	w.Close()
	for _, vfs := range []types.VFS{newDirectFS(), walfs.New()} {
		w := open(vfs)
		check(w, fmt.Sprintf("reopened on %T", vfs))
		// The tail segment takes appends after the reopen.
		last := uint64(len(want))
		if err := w.StoreLogs([]*raft.Log{{Index: last + 1, Term: 1, Type: raft.LogCommand, Data: []byte("after")}}); err != nil {
			t.Fatal(err)
		}
		want = append(want, []byte("after"))
		check(w, "appended after the reopen")
		w.Close()
	}
}
