package lint

import (
	"slices"
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

// stateMachines sit between the storage layers and the network: a
// replicated state machine may reach the disk through the topic log, but
// neither the network, Raft nor the replication layer (its adapter to the
// replication seam lives in a package of its own), directly or through the
// packages it imports. Like the pure cores it reads no clock: time comes in
// its entries.
var stateMachines = []string{
	"internal/sequencer",
}

var forbiddenInStateMachines = []string{
	"net", "net/http", "syscall",
	"github.com/hashicorp/raft", "github.com/hashicorp/raft-wal", "github.com/hashicorp/raft-wal/",
	"github.com/hashicorp/serf/serf", "github.com/hashicorp/memberlist",
	"internal/replication", "internal/peer", "internal/netx", "internal/membership", "internal/meta",
	"internal/broker", "internal/cluster", "internal/cluster/", "internal/delivery", "internal/node", "internal/clock",
}

func TestStateMachinesStayBelowTheNetwork(t *testing.T) {
	files := loadFiles(t)
	for _, v := range coreViolations(importGraph(t, files), stateMachines, forbiddenInStateMachines) {
		t.Error(strings.Replace(v, "pure core", "state machine", 1))
	}
	for _, f := range files {
		if f.test || !slices.Contains(stateMachines, f.dir) {
			continue
		}
		for _, call := range clockCalls(f) {
			t.Errorf("%s: state machine calls time.%s; take time from the entries", call.pos, call.name)
		}
	}
}
