package migration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replicas"
)

// fakeMeta is a metadata group in memory: proposals apply at once.
type fakeMeta struct {
	mu      sync.Mutex
	st      fsm.State
	index   uint64
	changed chan struct{}
	cmds    []fsm.Op
}

func newFakeMeta() *fakeMeta { return &fakeMeta{changed: make(chan struct{})} }

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

func (m *fakeMeta) Propose(_ context.Context, cmd fsm.Command) (fsm.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.index++
	var res fsm.Result
	m.st, res = m.st.Apply(m.index, cmd)
	m.cmds = append(m.cmds, cmd.Op)
	close(m.changed)
	m.changed = make(chan struct{})
	return res, res.Err()
}

func (m *fakeMeta) must(t *testing.T, cmd fsm.Command) fsm.Result {
	t.Helper()
	res, err := m.Propose(context.Background(), cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd.Op, err)
	}
	return res
}

type noReplicas struct{}

func (noReplicas) Get(string) *replicas.Replica { return nil }
func (noReplicas) Keep(string) func()           { return func() {} }

type fakeFencer struct {
	mu         sync.Mutex
	fenced     map[string]bool
	redirected map[string]string
}

func (f *fakeFencer) Fence(_ context.Context, g, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fenced[g] = true
	return nil
}

func (f *fakeFencer) Unfence(g, to string, redirect bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.fenced, g)
	if redirect {
		if f.redirected == nil {
			f.redirected = map[string]string{}
		}
		f.redirected[g] = to
	}
}

type downPeers struct{}

func (downPeers) Call(context.Context, string, byte, []byte) ([]byte, error) {
	return nil, errors.New("link down")
}

func testNode(id string) fsm.Node {
	return fsm.Node{ID: id, JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Site: "s", Zone: "z", Tier: "core", PeerAddr: id + ":7950"}}
}

// TestDriverFailsWithdrawsAndRetries: a handover whose target cannot be
// reached fails, is recorded with its error, leaves nothing fenced and is
// tried again after a backoff; once the target leaves the registry, the
// decision is withdrawn.
func TestDriverFailsWithdrawsAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMeta()
		for _, id := range []string{"a", "b"} {
			m.must(t, fsm.RegisterNode(testNode(id)))
		}
		now := time.Unix(100, 0)
		m.must(t, fsm.CreateGroup(fsm.Group{ID: "g", Rule: "g/#", Home: "a", Voters: []string{"a"}, Created: now}))
		m.must(t, fsm.SetGroupDesired(fsm.DesiredChange{Group: "g", Epoch: 1, Home: "b", Voters: []string{"b"}, Reason: fsm.ReasonManual, At: now}))
		fencer := &fakeFencer{fenced: map[string]bool{}}
		d, err := New(Config{NodeID: "a", Workers: 2, Meta: m, Replicas: noReplicas{}, Home: fencer, Peers: downPeers{}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		time.Sleep(2500 * time.Millisecond) // lint:sleep-ok fake time: a first attempt and a retry after 1 s
		synctest.Wait()
		ms := d.Migrations()
		if len(ms) < 2 {
			t.Fatalf("migrations %+v, want a failed attempt and its retry", ms)
		}
		for _, x := range ms {
			if x.State != StateFailed || x.Kind != KindHandover || x.Error == "" {
				t.Errorf("migration %+v", x)
			}
		}
		if len(fencer.fenced) != 0 {
			t.Errorf("left fenced: %v", fencer.fenced)
		}
		if _, err := New(Config{NodeID: "a", Workers: 2000, Meta: m, Replicas: noReplicas{}, Home: fencer}); !errors.Is(err, ErrConfig) {
			t.Errorf("2000 workers: %v, want ErrConfig", err)
		}
		m.must(t, fsm.RemoveNode("b"))
		time.Sleep(40 * time.Second) // lint:sleep-ok fake time: past the longest backoff
		synctest.Wait()
		if g, _ := m.State().Group("g"); g.Desired != nil {
			t.Errorf("decision for a node that left still pending: %+v", g.Desired)
		}
		cancel()
		<-done
	})
}

// TestDriverRecoversFromAFenceRecord: a node restarted during a handover
// fences the group before anything else and proposes the record
// unchanged at the switch's epoch. If that commits (the switch had not),
// the fence is lifted and the record removed. If the switch had committed,
// the group is the target's: with the target unreachable it stays fenced
// here, its record kept, and is tried again (it is never given back).
func TestDriverRecoversFromAFenceRecord(t *testing.T) {
	for _, switched := range []bool{false, true} {
		t.Run(fmt.Sprintf("switched %v", switched), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newHandoverMeta(t)
				if switched {
					m.must(t, fsm.SetGroupHome(fsm.HomeChange{Group: "g", Home: "b", Epoch: 2, Reason: fsm.ReasonManual, At: time.Unix(200, 0),
						Handover: []string{"b"}, HandoverFrom: "a"}))
				}
				dir := t.TempDir()
				if err := writeFence(dir, fenceRecord{Group: "g", To: "b", Epoch: 2, Reason: fsm.ReasonManual}); err != nil {
					t.Fatal(err)
				}
				fencer := &fakeFencer{fenced: map[string]bool{}}
				d, err := New(Config{NodeID: "a", Workers: 2, Meta: m, Replicas: noReplicas{}, Home: fencer, Peers: downPeers{}, Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				if !fencer.fenced["g"] {
					t.Fatal("the group is not fenced once the driver is built (before the node serves)")
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); d.Run(ctx) }()
				time.Sleep(5 * time.Second) // lint:sleep-ok fake time: the settling, and retries
				synctest.Wait()
				cancel()
				<-done
				g, _ := m.State().Group("g")
				fences, ferr := readFences(dir)
				fencer.mu.Lock()
				defer fencer.mu.Unlock()
				if switched {
					if !fencer.fenced["g"] || g.Home != "b" || g.Epoch != 2 || ferr != nil || len(fences) != 1 {
						t.Errorf("fenced %v, record %+v, fence records %+v (%v): want fenced, the target's at epoch 2, the record kept",
							fencer.fenced["g"], g, fences, ferr)
					}
					if n := len(d.Migrations()); n < 2 {
						t.Errorf("%d attempts, want the recovery tried again", n)
					}
					return
				}
				if fencer.fenced["g"] || g.Home != "a" || g.Epoch != 2 || fencer.redirected["g"] != "" {
					t.Errorf("fenced %v, record %+v, redirected %v: want home a at epoch 2, taking publishes again", fencer.fenced["g"], g, fencer.redirected)
				}
				if ferr != nil || len(fences) != 0 {
					t.Errorf("fence records left: %+v, %v", fences, ferr)
				}
			})
		})
	}
}
