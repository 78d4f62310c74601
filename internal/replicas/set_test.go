package replicas

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/sequencer"
)

// fakeMeta is a metadata copy the test changes by applying commands.
type fakeMeta struct {
	mu      sync.Mutex
	st      fsm.State
	changed chan struct{}
	homes   int           // SetGroupHome calls
	ready   chan struct{} // CaughtUp: closed unless the test holds the copy behind
}

func newFakeMeta(t *testing.T) *fakeMeta {
	m := &fakeMeta{changed: make(chan struct{}), ready: make(chan struct{})}
	close(m.ready)
	m.apply(t, fsm.RegisterNode(fsm.Node{ID: "n1", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
	return m
}

func (m *fakeMeta) State() fsm.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

func (m *fakeMeta) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *fakeMeta) CaughtUp() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

// behind makes the copy not caught up until the returned func is called.
func (m *fakeMeta) behind() (catchUp func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ready := make(chan struct{})
	m.ready = ready
	return sync.OnceFunc(func() { close(ready) })
}

func (m *fakeMeta) apply(t *testing.T, cmd fsm.Command) fsm.Result {
	t.Helper()
	m.mu.Lock()
	next, res := m.st.Apply(m.st.Applied()+1, cmd)
	m.st = next
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	if res.Error != nil {
		t.Fatalf("%s: %v", cmd.Op, res.Error)
	}
	return res
}

func (m *fakeMeta) SetGroupHome(_ context.Context, c fsm.HomeChange) (fsm.Group, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.homes++
	next, res := m.st.Apply(m.st.Applied()+1, fsm.SetGroupHome(c))
	m.st = next
	close(m.changed)
	m.changed = make(chan struct{})
	if res.Group == nil {
		return fsm.Group{}, res.Err()
	}
	return *res.Group, res.Err()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond) // lint:sleep-ok fake time
	}
	t.Fatalf("%s: not true", what)
}

// TestSingleGroupLifecycle: a record naming this node its only voter opens
// a Single over a sequencer; its leader applies retention ticks with the
// record's bounds; a deleted record closes the replica and removes its
// storage.
func TestSingleGroupLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		dir := t.TempDir()
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: dir, RetentionInterval: time.Second, SegmentBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		set.Start()
		defer set.Close()
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "g/1", Rule: "g/#", Home: "n1", Voters: []string{"n1"},
			Retention: fsm.Retention{Messages: 3}, Created: time.Unix(2, 0)}))
		var r *Replica
		eventually(t, "replica opened", func() bool { r = set.Get("g/1"); return r != nil })
		changed := set.Changed()
		for i := range 200 {
			cmd, err := sequencer.EncodeCommand(sequencer.PublishCommand(sequencer.Publish{Topic: "g/a", Message: []byte{byte(i)}}))
			if err != nil {
				t.Fatal(err)
			}
			if res, err := r.Rep.Propose(context.Background(), cmd); err != nil || res.Err != nil || res.Publishes[0].Index != uint64(i+1) {
				t.Fatalf("publish %d: %+v %v", i, res, err)
			}
		}
		select {
		case <-changed:
		default:
			t.Fatal("appends did not wake Changed")
		}
		eventually(t, "retention applied", func() bool {
			first, _, _ := r.Seq.Bounds("g/a")
			return first > 100
		})
		if first, last, _ := r.Seq.Bounds("g/a"); last != 200 || last-first+1 < 3 {
			t.Fatalf("after retention [%d, %d]: fewer than the 3 kept", first, last)
		}
		groupDir := filepath.Join(dir, "g%2F1")
		if _, err := os.Stat(filepath.Join(groupDir, "log")); err != nil {
			t.Fatal(err)
		}
		meta.apply(t, fsm.DeleteGroup("g/1"))
		eventually(t, "replica closed and its storage removed", func() bool {
			_, err := os.Stat(groupDir)
			return set.Get("g/1") == nil && os.IsNotExist(err)
		})
		if _, err := r.Seq.ReadSeq(1, 1, 0); err == nil {
			t.Error("the sequencer still reads after its group was deleted")
		}
	})
}

// TestNothingOpensBeforeTheCopyCaughtUp: a copy that names this node a
// group's home while it has not caught up with the group (a node
// restarted behind: the group may have moved away) opens nothing, and
// Await does not hand the home side a replica; once it caught up with a
// record that names another node, the group stays closed, and a group
// that does name this node opens.
func TestNothingOpensBeforeTheCopyCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		meta.apply(t, fsm.RegisterNode(fsm.Node{ID: "n2", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "moved", Rule: "moved", Home: "n1", Voters: []string{"n1"}, Created: time.Unix(2, 0)}))
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "mine", Rule: "mine", Home: "n1", Voters: []string{"n1"}, Created: time.Unix(2, 0)}))
		catchUp := meta.behind()
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		set.Start()
		defer set.Close()
		time.Sleep(time.Minute) // lint:sleep-ok fake time: the watcher would have opened by now
		synctest.Wait()
		if ids := set.IDs(); len(ids) != 0 {
			t.Fatalf("opened %v before the metadata copy caught up", ids)
		}
		if r := set.Await(context.Background(), "moved", time.Second); r != nil {
			t.Fatal("Await handed out a replica before the copy caught up")
		}
		// The copy catches up: "moved" is homed on n2 now.
		g, _ := meta.State().Group("moved")
		if _, err := meta.SetGroupHome(context.Background(), fsm.HomeChange{Group: "moved", Epoch: g.Epoch + 1, Home: "n2", Handover: []string{"n2"}, HandoverFrom: "n1", Reason: fsm.ReasonManual, At: time.Unix(3, 0)}); err != nil {
			t.Fatal(err)
		}
		catchUp()
		eventually(t, "the group still homed here opens", func() bool { return set.Get("mine") != nil })
		synctest.Wait()
		if set.Get("moved") != nil {
			t.Fatal("opened a group that moved away while the copy was behind")
		}
		if r := set.Await(context.Background(), "moved", time.Second); r != nil {
			t.Fatal("Await handed out a replica of a group homed elsewhere")
		}
	})
}

// TestReplicatedGroupNeedsAnEngine: a node without a replication engine
// (running alone) refuses a group with several voters, and keeps trying.
func TestReplicatedGroupNeedsAnEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		meta.apply(t, fsm.RegisterNode(fsm.Node{ID: "n2", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		set.Start()
		defer set.Close()
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "g", Rule: "g", Home: "n1", Voters: []string{"n1", "n2"}, Created: time.Unix(2, 0)}))
		eventually(t, "failures counted", func() bool { return testCounter(set.metrics.openFailures) >= 2 })
		if set.Get("g") != nil {
			t.Fatal("opened a replicated group without an engine")
		}
	})
}

// TestBudget: a node at its group budget opens no more replicas (and
// keeps trying, in case one closes).
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: t.TempDir(), MaxGroups: 2})
		if err != nil {
			t.Fatal(err)
		}
		set.Start()
		defer set.Close()
		for _, id := range []string{"a", "b", "c"} {
			meta.apply(t, fsm.CreateGroup(fsm.Group{ID: id, Rule: id, Home: "n1", Voters: []string{"n1"}, Created: time.Unix(2, 0)}))
		}
		eventually(t, "two open, the third refused", func() bool {
			return len(set.IDs()) == 2 && testCounter(set.metrics.openFailures) >= 1
		})
		meta.apply(t, fsm.DeleteGroup("a"))
		eventually(t, "the third opens once one closed", func() bool { return set.Get("c") != nil && set.Get("a") == nil })
	})
}

// TestExpectOpensAheadOfTheCopy: a record given to Expect (a handover's
// switch, committed, that the metadata copy does not show yet) opens the
// group here at once, and the keeper does not claim it from the copy's
// older record; once the copy shows the switch the group stays open. A
// record the copy already passed, or one naming another node, opens
// nothing.
func TestExpectOpensAheadOfTheCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		meta.apply(t, fsm.RegisterNode(fsm.Node{ID: "n2", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: t.TempDir(), RetentionInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		set.Start()
		defer set.Close()
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "g/1", Rule: "g/#", Home: "n2", Voters: []string{"n2"}, Created: time.Unix(2, 0)}))
		rec, _ := meta.State().Group("g/1")
		stale := rec
		stale.Home, stale.Voters = "n1", []string{"n1"}
		set.Expect(stale) // epoch 1: the copy has it already
		other := rec
		other.Epoch = 2
		set.Expect(other)       // names n2
		time.Sleep(time.Second) // lint:sleep-ok fake time: a reconcile's chance
		synctest.Wait()
		if set.Get("g/1") != nil {
			t.Fatal("opened on a record the copy already passed, or naming another node")
		}
		switched := rec
		switched.Home, switched.Voters, switched.Epoch = "n1", []string{"n1"}, 2
		set.Expect(switched)
		eventually(t, "opened ahead of the copy", func() bool { return set.Get("g/1") != nil })
		time.Sleep(time.Second) // lint:sleep-ok fake time: the keeper's chance to claim
		synctest.Wait()
		meta.mu.Lock()
		homes := meta.homes
		meta.mu.Unlock()
		if homes != 0 {
			t.Errorf("the keeper proposed %d home changes from the copy's older record", homes)
		}
		meta.apply(t, fsm.SetGroupHome(fsm.HomeChange{Group: "g/1", Home: "n1", Epoch: 2, Reason: fsm.ReasonManual, At: time.Unix(3, 0), Handover: []string{"n1"}}))
		time.Sleep(time.Second) // lint:sleep-ok fake time
		synctest.Wait()
		if set.Get("g/1") == nil {
			t.Fatal("closed once the copy showed the switch")
		}
		set.mu.Lock()
		n := len(set.mu.ahead)
		set.mu.Unlock()
		if n != 0 {
			t.Errorf("%d records kept ahead after the copy caught up", n)
		}
	})
}

// TestAwait: Await waits for a replica the record says this node will
// open (the watcher had not opened it yet), answers at once for a group
// the record places elsewhere, and waits no longer than asked for a group
// this node's copy has no record of.
func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		meta.apply(t, fsm.RegisterNode(fsm.Node{ID: "n2", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer set.Close()
		ctx := context.Background()
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "here", Rule: "here", Home: "n1", Voters: []string{"n1"}, Created: time.Unix(2, 0)}))
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "there", Rule: "there", Home: "n2", Voters: []string{"n2"}, Created: time.Unix(2, 0)}))

		got := make(chan *Replica, 1)
		start := time.Now()
		go func() { got <- set.Await(ctx, "here", 5*time.Second) }()
		time.Sleep(time.Second) // lint:sleep-ok fake time: the watcher starts a second late
		set.Start()
		if r := <-got; r == nil || r.ID != "here" {
			t.Fatalf("Await(here) = %v after %v", r, time.Since(start))
		}
		if d := time.Since(start); d >= 5*time.Second {
			t.Fatalf("Await(here) returned after %v: it waited for its bound, not for the replica", d)
		}

		start = time.Now()
		if r := set.Await(ctx, "there", 5*time.Second); r != nil || time.Since(start) != 0 {
			t.Fatalf("Await(there) = %v after %v, want nil at once", r, time.Since(start))
		}
		start = time.Now()
		if r := set.Await(ctx, "unknown", 2*time.Second); r != nil || time.Since(start) != 2*time.Second {
			t.Fatalf("Await(unknown) = %v after %v, want nil after 2s", r, time.Since(start))
		}
	})
}

// TestHandoverGate: a record naming this node home by a handover opens
// the group only once the handed-over log is marked installed for the
// record's epoch (not on a mark of another epoch, not on storage of its
// own); Keep holds the old home's replica open after the record named
// another node, its keeper claiming nothing, until released.
func TestHandoverGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		meta.apply(t, fsm.RegisterNode(fsm.Node{ID: "n2", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
		dir := t.TempDir()
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: dir, RetentionInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		set.Start()
		defer set.Close()
		settle := func() {
			time.Sleep(time.Second) // lint:sleep-ok fake time: a reconcile's chance
			synctest.Wait()
		}
		// The target's side.
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "g/1", Rule: "g/#", Home: "n2", Voters: []string{"n2"}, Created: time.Unix(2, 0)}))
		meta.apply(t, fsm.SetGroupHome(fsm.HomeChange{Group: "g/1", Home: "n1", Epoch: 2, Reason: fsm.ReasonManual, At: time.Unix(3, 0),
			Handover: []string{"n1"}, HandoverFrom: "n2"}))
		settle()
		if set.Get("g/1") != nil {
			t.Fatal("opened a handed-over group before its log was installed")
		}
		if err := os.MkdirAll(filepath.Join(dir, "g%2F1"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := WriteHandoverMark(dir, "g/1", 1); err != nil {
			t.Fatal(err)
		}
		set.kickNow()
		settle()
		if set.Get("g/1") != nil {
			t.Fatal("opened on the mark of another epoch")
		}
		if err := WriteHandoverMark(dir, "g/1", 2); err != nil {
			t.Fatal(err)
		}
		if HandoverMark(dir, "g/1") != 2 {
			t.Fatal("the mark does not read back")
		}
		set.kickNow()
		eventually(t, "opened once marked", func() bool { return set.Get("g/1") != nil })

		// The old home's side.
		meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "g/2", Rule: "g/#", Home: "n1", Voters: []string{"n1"}, Created: time.Unix(2, 0)}))
		eventually(t, "g/2 opened", func() bool { return set.Get("g/2") != nil })
		release := set.Keep("g/2")
		meta.apply(t, fsm.SetGroupHome(fsm.HomeChange{Group: "g/2", Home: "n2", Epoch: 2, Reason: fsm.ReasonManual, At: time.Unix(3, 0),
			Handover: []string{"n2"}, HandoverFrom: "n1"}))
		settle()
		if set.Get("g/2") == nil {
			t.Fatal("a kept replica closed when the record named another node")
		}
		meta.mu.Lock()
		homes := meta.homes
		meta.mu.Unlock()
		if homes != 0 {
			t.Errorf("a kept replica's keeper proposed %d home changes", homes)
		}
		release()
		release() // once only
		eventually(t, "closed once released", func() bool { return set.Get("g/2") == nil })
		release = set.Keep("g/2")
		eventually(t, "reopened on its storage when kept again", func() bool { return set.Get("g/2") != nil })
		release()
		eventually(t, "closed again", func() bool { return set.Get("g/2") == nil })
	})
}
