package migration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/sequencer/replica"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// direct routes MethodMigrate calls to a Receiver in the same process.
type direct struct{ rv *Receiver }

func (d direct) Call(ctx context.Context, _ string, _ byte, body []byte) ([]byte, error) {
	return d.rv.Serve(ctx, "a", body)
}

type oneReplica struct{ r *replicas.Replica }

func (o oneReplica) Get(id string) *replicas.Replica {
	if o.r != nil && o.r.ID == id {
		return o.r
	}
	return nil
}

func (oneReplica) Keep(string) func() { return func() {} }

// openOnRecord is the target's replica set: it runs group g (on the log
// installed in dir) once the record names this node ("b") and, for a
// record naming it by a handover, the log is marked installed for the
// record's epoch (as replicas.Set does).
type openOnRecord struct {
	t        *testing.T
	meta     *fakeMeta
	dir      string
	opts     topiclog.Options
	r        *replicas.Replica
	expected atomic.Bool
}

func (o *openOnRecord) Expect(rec fsm.Group) {
	if rec.Home == "b" && (rec.HandoverFrom == "" || replicas.HandoverMark(o.dir, rec.ID) == rec.Epoch) {
		o.expected.Store(true)
	}
}

func (o *openOnRecord) Keep(string) func() { return func() {} }

func (o *openOnRecord) Get(id string) *replicas.Replica {
	rec, ok := o.meta.State().Group(id)
	named := ok && rec.Home == "b" && (rec.HandoverFrom == "" || replicas.HandoverMark(o.dir, id) == rec.Epoch)
	if !named && !o.expected.Load() {
		return nil
	}
	if o.r == nil {
		seq, err := sequencer.Open(topiclog.OSFS{}, filepath.Join(o.dir, replication.GroupID(id).DirName(), "log"), sequencer.Options{BatchEntries: true, Log: o.opts})
		if err != nil {
			o.t.Fatal(err)
		}
		o.t.Cleanup(func() { _ = seq.Close() })
		rep, err := replication.NewSingle[sequencer.Result](replication.GroupID(id), replica.New(seq), replication.SingleConfig{NodeID: "b"})
		if err != nil {
			o.t.Fatal(err)
		}
		o.t.Cleanup(func() { _ = rep.Close() })
		o.r = &replicas.Replica{ID: id, Seq: seq, Rep: rep}
	}
	return o.r
}

// TestHandoverInstallsAnEqualLog: the snapshot, sent in many chunks while
// publishes go on, then the switch (the target does not open the group on
// the record alone), then the tail with the publishes taken meanwhile,
// leave the target a log equal to the old home's, installed where its
// replica set opens the group and marked for the switch's epoch; the
// target answers that it serves; a second handover of a group the target
// already runs is refused.
func TestHandoverInstallsAnEqualLog(t *testing.T) {
	old := chunkBytes
	chunkBytes = 4096
	defer func() { chunkBytes = old }()
	opts := topiclog.Options{SegmentBytes: topiclog.MinSegmentBytes}
	src, err := sequencer.Open(topiclog.OSFS{}, filepath.Join(t.TempDir(), "log"), sequencer.Options{BatchEntries: true, Log: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	at := time.Unix(1700000000, 0)
	index := uint64(0)
	publish := func(n int) {
		for range n {
			index++
			cmd, err := sequencer.EncodeCommand(sequencer.PublishCommand(sequencer.Publish{Topic: fmt.Sprintf("t/%d", index%4),
				Message: bytes.Repeat([]byte("m"), 300), QoS: 1, Key: sequencer.Key{Client: "c", PacketID: uint16(index%1000 + 1), Nonce: index}}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := src.Apply([]sequencer.Entry{{Index: index, Term: 1, Time: at.Add(time.Duration(index) * time.Millisecond), Cmd: cmd}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(300)
	dstDir := t.TempDir()
	meta := newHandoverMeta(t)
	target := &openOnRecord{t: t, meta: meta, dir: dstDir, opts: opts}
	rv := NewReceiver(ReceiverConfig{NodeID: "b", Dir: dstDir, Groups: target, Log: opts})
	defer rv.Close()
	d := &Driver{cfg: Config{NodeID: "a", Peers: direct{rv}, Meta: meta}, clock: clock.Real{}}
	rec, _ := meta.State().Group("g")
	x := &exec{d: d, m: &Machine{Group: "g", To: "b", rec: rec}}
	d.cfg.Replicas = oneReplica{&replicas.Replica{ID: "g", Seq: src}}
	ctx := context.Background()
	if o := x.sendSnapshot(ctx, "b"); o.Result != ResultOK {
		t.Fatalf("snapshot: %+v", o)
	}
	publish(100)
	if o := x.do(ctx, Action{Op: OpProposeHome, Node: "b", Home: "b", Epoch: 2, Reason: fsm.ReasonManual, Voters: []string{"b"}}); o.Result != ResultOK {
		t.Fatalf("the switch: %+v", o)
	}
	if g, _ := meta.State().Group("g"); g.Home != "b" || g.Epoch != 2 || len(g.Voters) != 1 || g.Voters[0] != "b" || g.HomeReason != fsm.ReasonManual || g.HandoverFrom != "a" {
		t.Fatalf("after the switch the record is %+v", g)
	}
	if target.Get("g") != nil {
		t.Fatal("the target opened the group on the record, before the tail")
	}
	publish(100) // the old home serves until it fences: still in the tail
	if o := x.sendTail(ctx, Action{Op: OpSwitch, Node: "b", Epoch: 2}); o.Result != ResultOK {
		t.Fatalf("tail: %+v", o)
	}
	if x.served.IsZero() || !target.expected.Load() || replicas.HandoverMark(dstDir, "g") != 2 {
		t.Errorf("the target's answer did not say it serves the group, it was not told the record, or the log is not marked for epoch 2")
	}
	dst := target.Get("g").Seq
	a, _ := src.ReadRaw(1, 1<<20, 64<<20)
	b, _ := dst.ReadRaw(1, 1<<20, 64<<20)
	if len(a) != 500 || len(a) != len(b) {
		t.Fatalf("%d records handed over, the old home has %d", len(b), len(a))
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].Index != b[i].Index || !a[i].Time.Equal(b[i].Time) || a[i].Mark != b[i].Mark || !bytes.Equal(a[i].Payload, b[i].Payload) {
			t.Fatalf("record %d: %+v, old home %+v", i, b[i], a[i])
		}
	}
	if dst.Applied() != src.Applied() {
		t.Errorf("applied %d, old home %d", dst.Applied(), src.Applied())
	}
	// The target runs the group now: another handover is refused.
	if o := x.sendSnapshot(ctx, "b"); o.Result != ResultFailed {
		t.Fatalf("snapshot to a node that runs the group: %+v", o)
	}
}

// newHandoverMeta is a metadata group with nodes a and b and group g homed
// on a (epoch 1), with a decision to move it to b.
func newHandoverMeta(t *testing.T) *fakeMeta {
	m := newFakeMeta()
	for _, id := range []string{"a", "b"} {
		m.must(t, fsm.RegisterNode(testNode(id)))
	}
	now := time.Unix(100, 0)
	m.must(t, fsm.CreateGroup(fsm.Group{ID: "g", Rule: "g/#", Home: "a", Voters: []string{"a"}, Created: now}))
	m.must(t, fsm.SetGroupDesired(fsm.DesiredChange{Group: "g", Epoch: 1, Home: "b", Voters: []string{"b"}, Reason: fsm.ReasonManual, At: now}))
	return m
}

// lossy routes MethodMigrate calls to a Receiver, losing the switch
// request's answer (the target installed the tail; the old home does not
// know) or the request itself.
type lossy struct {
	rv       *Receiver
	loseWhat string // "answer" or "request"
	// fences: the old home's fence records; recorded: one was there
	// when the switch request went out.
	fences   string
	recorded bool
}

func (l *lossy) Call(ctx context.Context, _ string, _ byte, body []byte) ([]byte, error) {
	req, err := decodeRequest(body)
	if err == nil && req.Kind == reqSwitch {
		f, _ := readFences(l.fences)
		l.recorded = len(f) == 1 && f[0].Group == req.Group && f[0].Epoch == req.Epoch
	}
	if err == nil && req.Kind == reqSwitch && l.loseWhat != "" {
		lose := l.loseWhat
		l.loseWhat = "" // once
		if lose == "answer" {
			_, _ = l.rv.Serve(ctx, "a", body)
		}
		return nil, errors.New("connection lost")
	}
	return l.rv.Serve(ctx, "a", body)
}

// sourceLog is an old home's log of n publishes.
func sourceLog(t *testing.T, opts topiclog.Options, n int) *sequencer.Sequencer {
	src, err := sequencer.Open(topiclog.OSFS{}, filepath.Join(t.TempDir(), "log"), sequencer.Options{BatchEntries: true, Log: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	for i := 1; i <= n; i++ {
		cmd, err := sequencer.EncodeCommand(sequencer.PublishCommand(sequencer.Publish{Topic: "t/1", Message: []byte("m"), QoS: 1,
			Key: sequencer.Key{Client: "c", PacketID: uint16(i), Nonce: uint64(i)}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Apply([]sequencer.Entry{{Index: uint64(i), Term: 1, Time: time.Unix(1700000000, 0), Cmd: cmd}}); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// TestTailLostAfterTheSwitch runs a handover through the machine and the
// driver's operations when the switch request or its answer is lost
// (after the switch committed): the old home stays fenced with its fence
// record, never gives the group back, and the recovery hands the log over
// again (the request lost: the target, which never opened the group
// meanwhile, installs it whole) or finds the target serving (the answer
// lost); then it redirects and removes the record. A recovery whose
// reclaim commits (the switch never did) lifts the fence and tells the
// target to drop what it was handed.
func TestTailLostAfterTheSwitch(t *testing.T) {
	opts := topiclog.Options{SegmentBytes: topiclog.MinSegmentBytes}
	setup := func(t *testing.T, loseWhat string) (*fakeMeta, *openOnRecord, *lossy, *Driver, *fakeFencer) {
		meta := newHandoverMeta(t)
		dir := t.TempDir()
		target := &openOnRecord{t: t, meta: meta, dir: dir, opts: opts}
		rv := NewReceiver(ReceiverConfig{NodeID: "b", Dir: dir, Groups: target, Log: opts})
		t.Cleanup(rv.Close)
		peers := &lossy{rv: rv, loseWhat: loseWhat, fences: t.TempDir()}
		fencer := &fakeFencer{fenced: map[string]bool{}}
		d := &Driver{cfg: Config{NodeID: "a", Peers: peers, Meta: meta, Home: fencer, Dir: peers.fences,
			Replicas: oneReplica{&replicas.Replica{ID: "g", Seq: sourceLog(t, opts, 50)}}}, clock: clock.Real{}}
		return meta, target, peers, d, fencer
	}
	run := func(d *Driver, m *Machine, a Action) []string {
		rec, _ := d.cfg.Meta.State().Group("g")
		x := &exec{d: d, m: m, rec: rec}
		var trace []string
		for more := true; more; {
			o := x.do(context.Background(), a)
			trace = append(trace, a.String()+" <- "+string(o.Result))
			a, more = m.Step(o)
		}
		return trace
	}
	for _, lose := range []string{"answer", "request"} {
		t.Run("the "+lose+" is lost", func(t *testing.T) {
			meta, target, peers, d, fencer := setup(t, lose)
			rec, _ := meta.State().Group("g")
			m, a, _ := Plan("a", rec)
			trace := run(d, m, a)
			g, _ := meta.State().Group("g")
			f, err := readFences(d.cfg.Dir)
			if m.State != StateFailed || !m.Resume || !fencer.fenced["g"] || g.Home != "b" || g.Epoch != 2 || g.HandoverFrom != "a" ||
				err != nil || len(f) != 1 || !peers.recorded {
				t.Fatalf("state %s resume %v (%s), record %+v, fenced %v, fence records %+v (%v), recorded at the switch %v:\n%s",
					m.State, m.Resume, m.Err, g, fencer.fenced, f, err, peers.recorded, strings.Join(trace, "\n"))
			}
			if open := target.Get("g") != nil; open != (lose == "answer") {
				t.Fatalf("the target serves: %v (it installed the tail: %v)", open, lose == "answer")
			}
			m, a = Recover("a", "g", f[0].To, f[0].Epoch, f[0].Reason)
			trace = run(d, m, a)
			g, _ = meta.State().Group("g")
			f, err = readFences(d.cfg.Dir)
			if m.State != StateDone || fencer.fenced["g"] || fencer.redirected["g"] != "b" || g.Home != "b" || g.Epoch != 2 ||
				err != nil || len(f) != 0 || target.Get("g") == nil {
				t.Fatalf("recovery: state %s (%s), record %+v, fenced %v, redirected %v, fence records %+v (%v):\n%s",
					m.State, m.Err, g, fencer.fenced, fencer.redirected, f, err, strings.Join(trace, "\n"))
			}
			if n := target.Get("g").Seq.NextSeq(); n != 51 {
				t.Errorf("the target's log ends at %d, want 51", n)
			}
		})
	}
	t.Run("the reclaim commits", func(t *testing.T) {
		meta, target, _, d, fencer := setup(t, "")
		rec, _ := meta.State().Group("g")
		x := &exec{d: d, m: &Machine{Group: "g", rec: rec}}
		if o := x.sendSnapshot(context.Background(), "b"); o.Result != ResultOK {
			t.Fatalf("snapshot: %+v", o)
		}
		if err := writeFence(d.cfg.Dir, fenceRecord{Group: "g", To: "b", Epoch: 2, Reason: fsm.ReasonManual}); err != nil {
			t.Fatal(err)
		}
		fencer.fenced["g"] = true
		m, a := Recover("a", "g", "b", 2, fsm.ReasonManual)
		trace := run(d, m, a)
		g, _ := meta.State().Group("g")
		f, err := readFences(d.cfg.Dir)
		if m.State != StateFailed || m.Resume || fencer.fenced["g"] || g.Home != "a" || g.Epoch != 2 || err != nil || len(f) != 0 || target.Get("g") != nil {
			t.Fatalf("state %s (%s), record %+v, fenced %v, fence records %+v (%v):\n%s", m.State, m.Err, g, fencer.fenced, f, err, strings.Join(trace, "\n"))
		}
		if _, staged := x.d.cfg.Peers.(*lossy).rv.staged["g"]; staged {
			t.Error("the target kept its staging after the abort")
		}
	})
	t.Run("refused", func(t *testing.T) {
		meta, target, _, d, _ := setup(t, "")
		rec, _ := meta.State().Group("g")
		x := &exec{d: d, m: &Machine{Group: "g", To: "b", rec: rec}}
		if o := x.sendSnapshot(context.Background(), "b"); o.Result != ResultOK {
			t.Fatalf("snapshot: %+v", o)
		}
		// A record that does not name the target.
		x.switched = &rec
		if o := x.sendTail(context.Background(), Action{Op: OpSwitch, Node: "b", Epoch: 2}); o.Result != ResultFailed {
			t.Fatalf("a switch whose record names another home: %+v, want failed", o)
		}
		if o := x.do(context.Background(), Action{Op: OpProposeHome, Home: "b", Epoch: 2, Reason: fsm.ReasonManual, Voters: []string{"b"}}); o.Result != ResultOK || x.switched == nil {
			t.Fatalf("the switch: %+v", o)
		}
		if target.Get("g") != nil {
			t.Fatal("the target opened the group on the record, before the tail")
		}
		if o := x.sendSnapshot(context.Background(), "b"); o.Result != ResultOK {
			t.Fatalf("snapshot: %+v", o)
		}
		x.next-- // the tail would not reach the old home's end
		if o := x.sendTail(context.Background(), Action{Op: OpSwitch, Node: "b", Epoch: 2}); o.Result != ResultFailed {
			t.Fatalf("a tail short of the old home's end: %+v, want failed", o)
		}
		if target.Get("g") != nil {
			t.Fatal("the target serves a log short of the old home's")
		}
	})
}

// TestServedAt: with the same delay each way, the estimate of when the
// target started serving is exact; an answer that claims more time at the
// target than the round trip took (clocks that disagree) falls back to
// the answer's arrival.
func TestServedAt(t *testing.T) {
	t0 := time.Unix(100, 0)
	ms := time.Millisecond
	// Sent at 0, 10 ms each way, served 20 ms after arriving: at 30.
	if got := servedAt(t0, t0.Add(40*ms), 20*ms); !got.Equal(t0.Add(30 * ms)) {
		t.Errorf("served at %v, want 30ms", got.Sub(t0))
	}
	for _, after := range []time.Duration{50 * ms, -ms} {
		if got := servedAt(t0, t0.Add(40*ms), after); !got.Equal(t0.Add(40 * ms)) {
			t.Errorf("after %v: served at %v, want the answer's arrival", after, got.Sub(t0))
		}
	}
}

// closedSet is a target's replica set that has not opened the group yet.
type closedSet struct{}

func (closedSet) Get(string) *replicas.Replica { return nil }
func (closedSet) Keep(string) func()           { return func() {} }
func (closedSet) Expect(fsm.Group)             {}

// TestInstalledLogNotReplaced: a switch request for an epoch whose log is
// installed already (an earlier attempt's answer was lost, and the replica
// set may be opening that log) is answered without replacing it.
func TestInstalledLogNotReplaced(t *testing.T) {
	opts := topiclog.Options{SegmentBytes: topiclog.MinSegmentBytes}
	meta := newHandoverMeta(t)
	dir := t.TempDir()
	rv := NewReceiver(ReceiverConfig{NodeID: "b", Dir: dir, Groups: closedSet{}, Log: opts})
	defer rv.Close()
	hand := func(n int) Outcome {
		d := &Driver{cfg: Config{NodeID: "a", Peers: direct{rv}, Meta: meta,
			Replicas: oneReplica{&replicas.Replica{ID: "g", Seq: sourceLog(t, opts, n)}}}, clock: clock.Real{}}
		rec, _ := meta.State().Group("g")
		x := &exec{d: d, m: &Machine{Group: "g", To: "b", rec: rec}}
		if o := x.sendSnapshot(context.Background(), "b"); o.Result != ResultOK {
			t.Fatalf("snapshot: %+v", o)
		}
		sw := rec
		sw.Home, sw.Voters, sw.Epoch, sw.HandoverFrom, sw.Desired = "b", []string{"b"}, 2, "a", nil
		x.switched = &sw
		return x.sendTail(context.Background(), Action{Op: OpSwitch, Node: "b", Epoch: 2})
	}
	if o := hand(50); o.Result != ResultOK {
		t.Fatalf("first install: %+v", o)
	}
	if o := hand(10); o.Result != ResultOK {
		t.Fatalf("the same epoch again: %+v", o)
	}
	seq, err := sequencer.Open(topiclog.OSFS{}, filepath.Join(dir, replication.GroupID("g").DirName(), "log"), sequencer.Options{BatchEntries: true, Log: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if n := seq.NextSeq(); n != 51 || replicas.HandoverMark(dir, "g") != 2 {
		t.Fatalf("installed log ends at %d (want 51, the first install's), mark %d", n, replicas.HandoverMark(dir, "g"))
	}
}

// TestAwaitServing: an operator's move waits until the target serves the
// group, not only until the record names it.
func TestAwaitServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := topiclog.Options{SegmentBytes: topiclog.MinSegmentBytes}
		meta := newHandoverMeta(t)
		dir := t.TempDir()
		target := &openOnRecord{t: t, meta: meta, dir: dir, opts: opts}
		rv := NewReceiver(ReceiverConfig{NodeID: "b", Dir: dir, Groups: target, Log: opts})
		defer rv.Close()
		meta.must(t, fsm.SetGroupHome(fsm.HomeChange{Group: "g", Home: "b", Epoch: 2, Reason: fsm.ReasonManual, At: time.Unix(200, 0),
			Handover: []string{"b"}, HandoverFrom: "a"}))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := AwaitServing(ctx, direct{rv}, nil, "b", "g"); err == nil {
			t.Fatal("the target serves a group whose log it was never handed")
		}
		if err := os.MkdirAll(filepath.Join(dir, replication.GroupID("g").DirName()), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := replicas.WriteHandoverMark(dir, "g", 2); err != nil {
			t.Fatal(err)
		}
		if err := AwaitServing(context.Background(), direct{rv}, nil, "b", "g"); err != nil {
			t.Fatalf("once installed: %v", err)
		}
	})
}
