package replication

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/memnet"
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

// scriptedFollower answers pipelined AppendEntries on ln's first
// connection as the library's transport does (in order), refusing the
// requests whose PrevLogEntry is in refuse. It returns when the
// connection closes.
func scriptedFollower(t *testing.T, ln net.Listener, refuse map[uint64]bool) {
	c, err := ln.Accept()
	if err != nil {
		t.Errorf("accept: %v", err)
		return
	}
	defer c.Close()
	br := bufio.NewReader(c)
	bw := bufio.NewWriter(c)
	dec := codec.NewDecoder(br, msgpackHandle())
	enc := codec.NewEncoder(bw, msgpackHandle())
	for {
		kind, err := br.ReadByte()
		if err != nil {
			return
		}
		if kind != rpcAppendEntries {
			t.Errorf("request type %d, want AppendEntries", kind)
			return
		}
		var req raft.AppendEntriesRequest
		if err := dec.Decode(&req); err != nil {
			return
		}
		resp := raft.AppendEntriesResponse{Term: req.Term, Success: !refuse[req.PrevLogEntry], LastLog: req.PrevLogEntry}
		if resp.Success {
			resp.LastLog += uint64(len(req.Entries))
		}
		if enc.Encode("") != nil || enc.Encode(&resp) != nil || bw.Flush() != nil {
			return
		}
	}
}

func appendReq(prev uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{Term: 1, PrevLogEntry: prev, PrevLogTerm: 1,
		Entries: []*raft.Log{{Index: prev + 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}}
}

// TestPipelineRefusalReleasesWaitingSender is hashicorp/raft#612's
// mechanism, against a scripted follower: two appends in flight (the
// depth), a third call waiting for room, and the first answer a refusal.
// Raft's reader stops at that answer; the waiting call must fail at once
// rather than wait for room (which, in the library's pipeline, only its
// own caller could give), and Close must return.
func TestPipelineRefusalReleasesWaitingSender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: time.Millisecond})
		defer nw.Close()
		ln, err := nw.Listen("10.0.0.2:7950")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			scriptedFollower(t, ln, map[uint64]bool{10: true})
		}()
		c, err := nw.DialFrom("10.0.0.1")(t.Context(), "10.0.0.2:7950")
		if err != nil {
			t.Fatal(err)
		}
		m := newMetrics(nil, newRoleCollector(func() map[Role]int { return nil }))
		p := newPipeline(c, 2, time.Minute, m, make(chan struct{}), nil)
		errs := make(chan error, 3)
		go func() {
			for _, prev := range []uint64{10, 11, 12} {
				_, err := p.AppendEntries(appendReq(prev), new(raft.AppendEntriesResponse))
				errs <- err
			}
		}()
		// Raft's reader: it stops at the first answer, a refusal.
		f := <-p.Consumer()
		if err := f.Error(); err != nil || f.Response().Success || f.Request().PrevLogEntry != 10 {
			t.Fatalf("first answer: err %v, success %v, prev %d; want the refusal of prev 10", err, f.Response().Success, f.Request().PrevLogEntry)
		}
		for i, want := range []error{nil, nil, errPipelineFailed} {
			if got := <-errs; !errors.Is(got, want) && got != want {
				t.Fatalf("append %d: %v, want %v", i+1, got, want)
			}
		}
		if _, err := p.AppendEntries(appendReq(13), new(raft.AppendEntriesResponse)); !errors.Is(err, errPipelineFailed) {
			t.Fatalf("append after the refusal: %v, want %v", err, errPipelineFailed)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
	})
}

// TestPipelineAnswersInOrder: without refusals every answer comes back,
// in request order, with more calls than the depth.
func TestPipelineAnswersInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: time.Millisecond})
		defer nw.Close()
		ln, err := nw.Listen("10.0.0.2:7950")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			scriptedFollower(t, ln, nil)
		}()
		c, err := nw.DialFrom("10.0.0.1")(t.Context(), "10.0.0.2:7950")
		if err != nil {
			t.Fatal(err)
		}
		m := newMetrics(nil, newRoleCollector(func() map[Role]int { return nil }))
		p := newPipeline(c, 4, time.Minute, m, make(chan struct{}), nil)
		const n = 20
		sent := make(chan error, 1)
		go func() {
			for prev := range uint64(n) {
				if _, err := p.AppendEntries(appendReq(prev), new(raft.AppendEntriesResponse)); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		for prev := range uint64(n) {
			f := <-p.Consumer()
			if err := f.Error(); err != nil || !f.Response().Success || f.Request().PrevLogEntry != prev || f.Response().LastLog != prev+1 {
				t.Fatalf("answer %d: err %v, success %v, prev %d, last log %d", prev, err, f.Response().Success, f.Request().PrevLogEntry, f.Response().LastLog)
			}
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
	})
}
