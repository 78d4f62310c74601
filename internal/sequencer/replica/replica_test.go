package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// node is one replica of the group: its engine, its topic log's filesystem
// (kept across a kill, as a crash leaves it) and its sequencer.
type node struct {
	id     string
	dir    string // the engine's data dir (Raft log and snapshots)
	fs     *topiclog.MemFS
	engine *replication.Engine
	seq    *sequencer.Sequencer
	group  *replication.Group[sequencer.Result]
}

// rcluster is a replicated group of three sequencers on memnet engines.
type rcluster struct {
	t     *testing.T
	nw    *memnet.Network
	opts  sequencer.Options
	mu    sync.Mutex // guards nodes' engine, seq and group (publishers read them)
	nodes map[string]*node
	// retried counts proposals retried after a lost leader or outcome;
	// lostDup those of them that had in fact committed (a duplicate).
	retried, lostDup atomic.Int64
	killed           map[*replication.Group[sequencer.Result]]bool // under mu
	restores         atomic.Int64
}

// restoreCounter counts the snapshots Raft installs into a sequencer.
type restoreCounter struct {
	*FSM
	n *atomic.Int64
}

func (r *restoreCounter) Restore(rd io.Reader) error {
	r.n.Add(1)
	return r.FSM.Restore(rd)
}

// dead reports whether g's node was killed: answers from it never reach
// the access node (its connection died with it).
func (c *rcluster) dead(g *replication.Group[sequencer.Result]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed[g]
}

const groupID replication.GroupID = "swarm/7"

func raddr(id string) string { return "10.0.0." + strings.TrimPrefix(id, "n") + ":7950" }

func (c *rcluster) start(id string, bootstrap bool) {
	c.t.Helper()
	n := c.nodes[id]
	ln, err := c.nw.Listen(raddr(id))
	if err != nil {
		c.t.Fatal(err)
	}
	e, err := replication.New(replication.Config{
		NodeID: id, Addr: raddr(id), Listener: ln, Dial: c.nw.DialFrom(strings.Split(raddr(id), ":")[0]),
		DataDir: n.dir, SnapshotThreshold: 64, TrailingLogs: 32,
		// A small batch also makes the leader's log cache (2 x MaxBatch) small, so
		// a replica that was down long enough needs a snapshot.
		MaxBatch: 16,
		// raft-wal serves compacted entries still in its active segment:
		// small segments (and 512-byte messages) make compaction real.
		SegmentBytes: 64 << 10,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	s, err := sequencer.Open(n.fs, dir, c.opts)
	if err != nil {
		c.t.Fatal(err)
	}
	g, err := replication.OpenGroup(context.Background(), e, groupID, replication.FSM[sequencer.Result](&restoreCounter{New(s), &c.restores}))
	if err != nil {
		c.t.Fatal(err)
	}
	if bootstrap {
		var voters []replication.Member
		for _, v := range []string{"n1", "n2", "n3"} {
			voters = append(voters, replication.Member{ID: v, Addr: raddr(v), Voter: true})
		}
		if err := g.Bootstrap(context.Background(), voters); err != nil {
			c.t.Fatal(err)
		}
	}
	c.mu.Lock()
	n.engine, n.seq, n.group = e, s, g
	c.mu.Unlock()
}

// kill stops node id as kill -9 would: its engine closes without handing
// anything over, and its topic log keeps only what a crash would leave.
func (c *rcluster) kill(id string, seed uint64) {
	c.t.Helper()
	n := c.nodes[id]
	c.mu.Lock()
	e, s := n.engine, n.seq
	c.killed[n.group] = true
	n.engine, n.seq, n.group = nil, nil, nil
	c.mu.Unlock()
	crashed := n.fs.CrashClone(seed)
	if err := e.Close(); err != nil {
		c.t.Fatal(err)
	}
	_ = s.Close()
	n.fs = crashed
}

// leader waits for a replica that leads and returns its group.
func (c *rcluster) leader() (string, *replication.Group[sequencer.Result]) {
	for {
		c.mu.Lock()
		for id, n := range c.nodes {
			if g := n.group; g != nil && g.IsLeader() {
				c.mu.Unlock()
				return id, g
			}
		}
		c.mu.Unlock()
		time.Sleep(time.Millisecond) // lint:sleep-ok polls in a synctest bubble's fake time
	}
}

// propose commits cmd, retrying the same bytes at whichever replica leads
// after a lost leader or an unknown outcome, as an access node does, and
// returns the result of the attempt that got one.
func (c *rcluster) propose(ctx context.Context, cmd []byte) (sequencer.Result, error) {
	for {
		_, g := c.leader()
		res, err := g.Propose(ctx, cmd)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return sequencer.Result{}, err
		}
		if !errors.Is(err, replication.ErrNotLeader) && !errors.Is(err, replication.ErrUnknownOutcome) && !errors.Is(err, replication.ErrClosed) {
			return sequencer.Result{}, err
		}
		time.Sleep(time.Millisecond) // lint:sleep-ok back-off in a synctest bubble's fake time
	}
}

// TestReplicatedGroupExactlyOnce runs the sequencer under Raft on three
// replicas: pipelined publishers sequence keyed publishes while the leader
// is killed (its topic log crashing with it) and restarted; every publish
// whose outcome was lost is retried at the new leader with the same key.
// Each publish ends in the log exactly once, with the index and seq its
// publisher was told; the access node's retries of acknowledged publishes
// get the original answer; all replicas hold byte-identical logs.
func TestReplicatedGroupExactlyOnce(t *testing.T) {
	seed := testSeed(t)
	synctest.Test(t, func(t *testing.T) {
		c := &rcluster{t: t, nw: memnet.New(memnet.Options{DefaultRTT: time.Millisecond}), nodes: map[string]*node{},
			killed: map[*replication.Group[sequencer.Result]]bool{},
			opts:   sequencer.Options{Log: topiclog.Options{SegmentBytes: 4 << 10, Sync: topiclog.SyncNone}}}
		for _, id := range []string{"n1", "n2", "n3"} {
			c.nodes[id] = &node{id: id, dir: t.TempDir(), fs: topiclog.NewMemFS()}
		}
		t.Cleanup(func() {
			for _, n := range c.nodes {
				if n.engine != nil {
					_ = n.engine.Close()
					_ = n.seq.Close()
				}
			}
			_ = c.nw.Close()
		})
		for _, id := range []string{"n1", "n2", "n3"} {
			c.start(id, true)
		}

		const publishers, each, window = 3, 80, 8
		type ack struct {
			p   sequencer.Publish
			pub sequencer.Published
		}
		acks := make([][]ack, publishers)
		var acked atomic.Int64
		var pad [512]byte
		var wg sync.WaitGroup
		for p := range publishers {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				for i := 0; i < each; i += window {
					// A window of publishes in flight, one command each.
					type inflight struct {
						p   sequencer.Publish
						cmd []byte
						pd  *replication.Pending[sequencer.Result]
					}
					var fl []inflight
					_, g := c.leader()
					for k := i; k < min(i+window, each); k++ {
						pb := sequencer.Publish{Topic: fmt.Sprintf("t/%d", k%4), Message: fmt.Appendf(pad[:], "p%d-%d", p, k), QoS: 2,
							Key: sequencer.Key{Client: fmt.Sprint("client-", p), PacketID: uint16(1 + k%50), Nonce: uint64(p<<32 | k)}}
						cmd, err := sequencer.EncodeCommand(sequencer.PublishCommand(pb))
						if err != nil {
							t.Error(err)
							return
						}
						pd, _ := g.Submit(ctx, cmd) // nil on error: resolved by propose below
						fl = append(fl, inflight{pb, cmd, pd})
					}
					for _, f := range fl {
						var res sequencer.Result
						var err error
						if f.pd != nil {
							res, err = f.pd.Wait(ctx)
						}
						if f.pd == nil || err != nil || c.dead(g) {
							res, err = c.propose(ctx, f.cmd) // the access node's retry
							c.retried.Add(1)
							if err == nil && res.Err == nil && res.Publishes[0].Duplicate {
								c.lostDup.Add(1)
							}
						}
						if err != nil || res.Err != nil {
							t.Errorf("publisher %d: %v %v", p, err, res.Err)
							return
						}
						acks[p] = append(acks[p], ack{f.p, res.Publishes[0]})
						acked.Add(1)
					}
				}
			})
		}
		// Kill the leader a quarter of the way, while it holds proposals
		// it has not answered.
		var lead string
		for {
			id, g := c.leader()
			if st := g.Stats(); acked.Load() >= publishers*each/4 && st.InFlight > 0 {
				lead = id
				break
			}
			time.Sleep(100 * time.Microsecond) // lint:sleep-ok polls in fake time
		}
		c.kill(lead, seed)
		t.Logf("killed the leader %s", lead)
		// While it is down, the others go on and compact their Raft logs
		// behind a snapshot, so that it catches up from one (Persist on
		// the leader, Restore on it).
		for acked.Load() < publishers*each*3/4 {
			time.Sleep(time.Millisecond) // lint:sleep-ok polls in fake time
		}
		for id, n := range c.nodes {
			if id != lead {
				if err := n.group.Snapshot(context.Background()); err != nil {
					t.Fatalf("snapshot on %s: %v", id, err)
				}
			}
		}
		c.start(lead, false)
		t.Logf("%s restarted with its topic log at entry %d", lead, c.nodes[lead].seq.Applied())
		wg.Wait()
		if t.Failed() {
			return
		}

		// The access node retries publishes that were acknowledged (their
		// answers lost): each gets the original answer. (The last ten of
		// each publisher: earlier packet ids were reused with new nonces,
		// which makes an old retry a new message.)
		retries := 0
		for p := range publishers {
			for _, a := range acks[p][each-10:] {
				cmd, _ := sequencer.EncodeCommand(sequencer.PublishCommand(a.p))
				res, err := c.propose(context.Background(), cmd)
				if err != nil || res.Publishes[0] != (sequencer.Published{Index: a.pub.Index, Seq: a.pub.Seq, Duplicate: true}) {
					t.Fatalf("retry of %s: %+v, %v; first answer %+v", a.p.Message[len(pad):], res, err, a.pub)
				}
				retries++
			}
		}

		// Every replica applies everything; their logs are byte-identical.
		_, g := c.leader()
		want := g.Stats().CommitIndex
		for _, n := range c.nodes {
			for n.group.Stats().Applied < want {
				time.Sleep(time.Millisecond) // lint:sleep-ok polls in fake time
			}
		}
		ref := files(t, c.nodes["n1"].fs)
		for _, id := range []string{"n2", "n3"} {
			sameFiles(t, "n1 and "+id, ref, files(t, c.nodes[id].fs))
		}
		// Each acknowledged publish is in the log once, where its
		// publisher was told.
		s := c.nodes["n1"].seq
		recs, err := s.ReadSeq(1, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[sequencer.Key]int{}
		for _, r := range recs {
			seen[r.Key]++
		}
		total := 0
		for p := range publishers {
			for _, a := range acks[p] {
				total++
				r, err := s.Get(a.p.Topic, a.pub.Index)
				if err != nil || r.Key != a.p.Key || r.Seq != a.pub.Seq || !bytes.Equal(r.Message, a.p.Message) {
					t.Fatalf("%s acknowledged at %+v, the log holds %+v, %v", a.p.Message[len(pad):], a.pub, r, err)
				}
				if seen[a.p.Key] != 1 {
					t.Fatalf("%s is in the log %d times", a.p.Message[len(pad):], seen[a.p.Key])
				}
			}
		}
		if len(recs) != total {
			t.Fatalf("%d records for %d publishes", len(recs), total)
		}
		dups := s.Stats().Duplicates
		t.Logf("%d publishes, %d records, %d segments; %d retried after the kill, %d of them had committed; %d snapshots installed; %d duplicates answered on n1 (%d explicit retries)",
			total, len(recs), s.Stats().Log.Segments, c.retried.Load(), c.lostDup.Load(), c.restores.Load(), dups, retries)
		if c.restores.Load() == 0 {
			t.Fatal("the restarted node did not catch up from a snapshot")
		}
		if n := c.restores.Load(); n > 2 {
			// One snapshot brings it up to date; more means its log
			// refused what followed the snapshot and it was sent again.
			t.Fatalf("%d snapshots installed to catch up one restarted node", n)
		}
		if c.lostDup.Load() == 0 {
			t.Fatal("no publish whose answer the kill lost had committed: nothing tested the retries under Raft")
		}
	})
}

// TestSingleReplica runs the sequencer under replication.Single (replicas
// 1): pipelined publishers share topic-log batches (BatchEntries, one
// fsync per batch), and after a crash (SyncAlways: nothing acknowledged is
// lost) their retries are answered with the original indexes.
func TestSingleReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fsys := topiclog.NewMemFS()
		opts := sequencer.Options{Log: topiclog.Options{Sync: topiclog.SyncAlways}, BatchEntries: true}
		s := open(t, fsys, opts)
		single, err := replication.NewSingle[sequencer.Result]("swarm/7", New(s), replication.SingleConfig{NodeID: "n1", Addr: "10.0.0.1:7950"})
		if err != nil {
			t.Fatal(err)
		}
		const publishers, each = 4, 50
		cmds := make([][][]byte, publishers)
		first := make([][]sequencer.Published, publishers)
		var wg sync.WaitGroup
		for p := range publishers {
			for k := range each {
				cmd, _ := sequencer.EncodeCommand(sequencer.PublishCommand(pub(fmt.Sprint("t/", k%3), fmt.Sprint(p, "-", k), fmt.Sprint("c", p), uint16(1+k), uint64(k))))
				cmds[p] = append(cmds[p], cmd)
			}
			wg.Go(func() {
				var pds []*replication.Pending[sequencer.Result]
				for _, cmd := range cmds[p] {
					pd, err := single.Submit(context.Background(), cmd)
					if err != nil {
						t.Error(err)
						return
					}
					pds = append(pds, pd)
				}
				for _, pd := range pds {
					res, err := pd.Wait(context.Background())
					if err != nil || res.Err != nil {
						t.Errorf("publisher %d: %v %v", p, err, res.Err)
						return
					}
					first[p] = append(first[p], res.Publishes[0])
				}
			})
		}
		wg.Wait()
		if err := single.Close(); err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if st.Log.Records != publishers*each {
			t.Fatalf("%d records for %d publishes", st.Log.Records, publishers*each)
		}
		t.Logf("%d publishes applied through Single, log at mark %d", publishers*each, st.Log.LastMark)

		// Crash, reopen, retry everything: all duplicates of the first
		// answers.
		r := open(t, fsys.CrashClone(1), opts)
		single, err = replication.NewSingle[sequencer.Result]("swarm/7", New(r), replication.SingleConfig{NodeID: "n1", Addr: "10.0.0.1:7950"})
		if err != nil {
			t.Fatal(err)
		}
		defer single.Close()
		for p := range publishers {
			for k, cmd := range cmds[p] {
				res, err := single.Propose(context.Background(), cmd)
				want := first[p][k]
				want.Duplicate = true
				if err != nil || res.Publishes[0] != want {
					t.Fatalf("retry %d-%d after a crash: %+v, %v; want %+v", p, k, res, err, want)
				}
			}
		}
	})
}
