package lint

import (
	"strings"
	"testing"
)

// storageLayers do I/O, but only to disk through their own seams: they
// must not reach the network, Raft or the packages that use them, so that
// replication and delivery stay above them and they stay testable alone.
var storageLayers = []string{
	"internal/topiclog",
}

var forbiddenInStorage = []string{
	"net",
	"github.com/hashicorp/raft",
	"github.com/sextantmq/sextant/internal/broker",
	"github.com/sextantmq/sextant/internal/cluster",
	"github.com/sextantmq/sextant/internal/peer",
	"github.com/sextantmq/sextant/internal/replication",
	"github.com/sextantmq/sextant/internal/delivery",
	"github.com/sextantmq/sextant/internal/node",
}

func TestStorageLayersStayBelowTheNetwork(t *testing.T) {
	for _, f := range loadFiles(t) {
		if !isStorage(f.dir) {
			continue
		}
		for _, p := range imports(f.ast) {
			for _, bad := range forbiddenInStorage {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("%s imports %q: storage layers must not reach the network, Raft or their users", f.rel, p)
				}
			}
		}
	}
}

func isStorage(dir string) bool {
	for _, s := range storageLayers {
		if dir == s || strings.HasPrefix(dir, s+"/") {
			return true
		}
	}
	return false
}
