package replication

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// faultyLog fails appends of the replica on node failOn: every every-th
// append it makes once armed, up to limit. Raft's follower answers each
// such AppendEntries with Success=false, as for a log that does not match.
type faultyLog struct {
	raft.LogStore
	node   string
	failOn *atomic.Value // string: the node whose appends fail
	every  int64
	limit  int64
	count  *atomic.Int64
	failed *atomic.Int64
}

var errInjected = errors.New("injected append failure")

func (l faultyLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l faultyLog) StoreLogs(logs []*raft.Log) error {
	if on, _ := l.failOn.Load().(string); on == l.node && l.count.Add(1)%l.every == 0 && l.failed.Load() < l.limit {
		l.failed.Add(1)
		return errInjected
	}
	return l.LogStore.StoreLogs(logs)
}

// TestPipelineHealsAfterRefusedAppend is hashicorp/raft#612's case with
// this package's pipeline: a follower refuses an append while the leader
// has several in flight to it (its log write failed). With the library's
// pipeline the leader's sender to that follower wedged there (the follower
// then never caught up, and Close hung); here the pipeline stops, the
// leader resends from the follower's last acknowledged entry, pipelines
// again, and every replica ends with every command, in order.
func TestPipelineHealsAfterRefusedAppend(t *testing.T) {
	for _, depth := range []int{2, 4} {
		t.Run(fmt.Sprintf("depth=%d", depth), func(t *testing.T) { testPipelineHeals(t, depth) })
	}
}

func testPipelineHeals(t *testing.T, depth int) {
	const refusals = 5
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		c.tune = func(cfg *Config) { cfg.Pipeline = depth; cfg.MaxBatch = 4 }
		var failOn atomic.Value
		failOn.Store("")
		var failed atomic.Int64
		for _, id := range ids(3) {
			var count atomic.Int64
			c.engine(id).wrapLog = func(_ GroupID, s raft.LogStore) raft.LogStore {
				return faultyLog{LogStore: s, node: id, failOn: &failOn, every: 10, limit: refusals, count: &count, failed: &failed}
			}
		}
		c.start(ids(3)...)
		leadID, lead := c.leader()
		follower := "n1"
		if follower == leadID {
			follower = "n2"
		}
		failOn.Store(follower)
		// Small batches and several publishers: many appends in flight.
		results := publishConcurrently(t, lead, 8, 60)
		log := c.converge()
		checkPublishers(t, log, results)
		if len(log) != 8*60 {
			t.Fatalf("%d commands in the log, want %d", len(log), 8*60)
		}
		if failed.Load() != refusals {
			t.Fatalf("%d appends failed on %s, want %d (the faults were not injected)", failed.Load(), follower, refusals)
		}
		opened := c.counter(leadID, "sextant_replication_pipelines_total", "event", pipelineOpened)
		stopped := c.counter(leadID, "sextant_replication_pipelines_total", "event", pipelineFailed)
		t.Logf("leader %s: %v pipelines opened, %v stopped by a refused append", leadID, opened, stopped)
		if stopped < 1 || opened < 3 {
			// One per follower at first, and more to the follower that
			// refused: it replicates by pipeline again. (A refusal may
			// also reach the leader outside a pipeline.)
			t.Fatalf("pipelines: %v opened, %v stopped; want the refusal to stop one and a new one to open", opened, stopped)
		}
		// Nothing is wedged: every replica closes.
		for _, id := range ids(3) {
			if err := c.groups[id].Close(); err != nil {
				t.Fatalf("close %s: %v", id, err)
			}
		}
	})
}
