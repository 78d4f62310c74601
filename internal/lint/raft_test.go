package lint

import (
	"strings"
	"testing"
)

// raftImporters may import the Raft library and its log store: the
// metadata group (internal/meta) and the placement groups' replication
// (internal/replication). Everything else goes through them, so the
// library's contract is wrapped once (STYLE.md anti-pattern 16).
var raftImporters = map[string]bool{
	"internal/meta":        true,
	"internal/replication": true,
}

func isRaftImport(p string) bool {
	return p == "github.com/hashicorp/raft" || strings.HasPrefix(p, "github.com/hashicorp/raft/") ||
		p == "github.com/hashicorp/raft-wal" || strings.HasPrefix(p, "github.com/hashicorp/raft-wal/")
}

func TestOnlyMetaAndReplicationImportRaft(t *testing.T) {
	for _, f := range loadFiles(t) {
		if raftImporters[f.dir] {
			continue
		}
		for _, p := range imports(f.ast) {
			if isRaftImport(p) {
				t.Errorf("%s imports %q: only internal/meta and internal/replication may use the Raft library", f.rel, p)
			}
		}
	}
}

func TestIsRaftImport(t *testing.T) {
	for p, want := range map[string]bool{
		"github.com/hashicorp/raft":             true,
		"github.com/hashicorp/raft-wal":         true,
		"github.com/hashicorp/raft-wal/metrics": true,
		"github.com/hashicorp/raftish":          false,
		"github.com/hashicorp/serf/serf":        false,
	} {
		if got := isRaftImport(p); got != want {
			t.Errorf("isRaftImport(%q) = %v, want %v", p, got, want)
		}
	}
}
