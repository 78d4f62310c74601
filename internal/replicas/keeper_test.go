package replicas

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
)

// fakeRep is a replica of a replicated group whose leadership the test
// sets; it records the lead transfers asked of it (which move the lead at
// once).
type fakeRep struct {
	self string
	ch   chan replication.Leader

	mu struct {
		sync.Mutex
		leader    string
		transfers []string
	}
}

func newFakeRep(self string) *fakeRep {
	return &fakeRep{self: self, ch: make(chan replication.Leader, 1)}
}

// lead makes id the leader this replica knows of, and notifies it.
func (f *fakeRep) lead(id string) {
	f.mu.Lock()
	f.mu.leader = id
	f.mu.Unlock()
	select {
	case <-f.ch:
	default:
	}
	f.ch <- f.Leader()
}

func (f *fakeRep) transfers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.mu.transfers...)
}

func (f *fakeRep) Submit(context.Context, []byte) (*replication.Pending[sequencer.Result], error) {
	return nil, errors.New("fake replica: no log")
}

func (f *fakeRep) Propose(context.Context, []byte) (sequencer.Result, error) {
	return sequencer.Result{}, errors.New("fake replica: no log")
}

func (f *fakeRep) Leader() replication.Leader {
	f.mu.Lock()
	defer f.mu.Unlock()
	return replication.Leader{ID: f.mu.leader, Local: f.mu.leader == f.self}
}

func (f *fakeRep) IsLeader() bool                        { return f.Leader().Local }
func (f *fakeRep) Leadership() <-chan replication.Leader { return f.ch }
func (f *fakeRep) Stats() replication.Stats              { return replication.Stats{} }
func (f *fakeRep) Close() error                          { return nil }

func (f *fakeRep) TransferLeadership(_ context.Context, to string) error {
	f.mu.Lock()
	f.mu.transfers = append(f.mu.transfers, to)
	f.mu.Unlock()
	f.lead(to)
	return nil
}

// TestKeeperKeepsTheLeadTheHomeGave: a group's first election that chose
// this node (n1) rather than its home (n2) hands the lead to the home; but
// once this replica saw the home lead, a lead that comes here (a
// migration's transfer that this node's metadata copy does not show yet:
// no decision naming n1 in the record) is kept and claimed, never handed
// back. Handing it back left the old home leading and its migration
// waiting for a record naming the target until the step timed out.
func TestKeeperKeepsTheLeadTheHomeGave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta(t)
		meta.apply(t, fsm.RegisterNode(fsm.Node{ID: "n2", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
		for _, id := range []string{"g/new", "g/moved"} {
			meta.apply(t, fsm.CreateGroup(fsm.Group{ID: id, Rule: "g/#", Home: "n2", Voters: []string{"n1", "n2"}, Created: time.Unix(2, 0)}))
		}
		set, err := New(Config{NodeID: "n1", Meta: meta, Dir: t.TempDir(), RetentionInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		reps := map[string]*fakeRep{}
		for _, id := range []string{"g/new", "g/moved"} {
			rep := newFakeRep("n1")
			reps[id] = rep
			r := &Replica{ID: id, Rep: rep}
			set.mu.Lock()
			set.mu.open[id] = r
			set.mu.Unlock()
			wg.Go(func() { set.keep(ctx, r) })
		}

		// g/new: the first election chose n1.
		reps["g/new"].lead("n1")
		synctest.Wait()
		if got := reps["g/new"].transfers(); len(got) != 1 || got[0] != "n2" {
			t.Fatalf("a new group's first election here: transfers %v, want the lead handed to n2", got)
		}

		// g/moved: n2 led it; then the lead came here while the copy shows
		// no decision.
		reps["g/moved"].lead("n2")
		synctest.Wait()
		if home, ok := set.HandingOver("g/moved"); ok {
			t.Fatalf("HandingOver names %s while n2 leads", home)
		}
		reps["g/moved"].lead("n1")
		synctest.Wait()
		if got := reps["g/moved"].transfers(); len(got) != 0 {
			t.Fatalf("the lead the home gave was handed back: transfers %v", got)
		}
		if home, ok := set.HandingOver("g/moved"); ok {
			t.Errorf("HandingOver names %s for a lead the home gave", home)
		}
		rec, _ := meta.State().Group("g/moved")
		if rec.Home != "n1" || rec.Epoch != 2 {
			t.Fatalf("record %+v: want n1 claimed home at epoch 2", rec)
		}
		if n := testCounter(set.metrics.homeClaims); n != 1 {
			t.Errorf("%v home claims counted, want 1", n)
		}
	})
}

// lossyMeta loses the answers of the first drop SetGroupHome calls: each
// waits until its caller gives up. With commit, the lost proposal was
// applied first (its answer lost on the way back); without, the proposal
// itself was lost.
type lossyMeta struct {
	*fakeMeta
	drop     int
	commit   bool
	attempts int // SetGroupHome calls, lost ones included
}

func (m *lossyMeta) SetGroupHome(ctx context.Context, c fsm.HomeChange) (fsm.Group, error) {
	m.mu.Lock()
	m.attempts++
	lose := m.drop > 0
	if lose {
		m.drop--
	}
	m.mu.Unlock()
	if !lose {
		return m.fakeMeta.SetGroupHome(ctx, c)
	}
	if m.commit {
		_, _ = m.fakeMeta.SetGroupHome(ctx, c)
	}
	<-ctx.Done()
	return fsm.Group{}, fmt.Errorf("fake: no answer: %w", ctx.Err())
}

// TestKeeperClaimLostIsTriedAgain: a leader's claim whose proposal is lost
// (no answer) is tried again after claimAttempt and claimRetry, with the
// record as the copy has it then, until one commits; one whose answer
// alone was lost (it committed, and the copy shows it) is not proposed
// again: the record names this node once, at one epoch. Each failed
// attempt is counted.
func TestKeeperClaimLostIsTriedAgain(t *testing.T) {
	for _, commit := range []bool{false, true} {
		t.Run(fmt.Sprintf("committed=%v", commit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				meta := &lossyMeta{fakeMeta: newFakeMeta(t), drop: 2, commit: commit}
				meta.apply(t, fsm.RegisterNode(fsm.Node{ID: "n2", JoinedAt: time.Unix(1, 0), Labels: fsm.Labels{Tier: fsm.TierCore}}))
				meta.apply(t, fsm.CreateGroup(fsm.Group{ID: "g/1", Rule: "g/#", Home: "n2", Voters: []string{"n1", "n2"}, Created: time.Unix(2, 0)}))
				set, err := New(Config{NodeID: "n1", Meta: meta, Dir: t.TempDir(), RetentionInterval: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				defer wg.Wait()
				defer cancel()
				rep := newFakeRep("n1")
				r := &Replica{ID: "g/1", Rep: rep}
				wg.Go(func() { set.keep(ctx, r) })
				rep.lead("n2")
				synctest.Wait()
				rep.lead("n1") // the lead came from the home: claimed
				// Long enough for every attempt the test expects (lost
				// ones take claimAttempt each, then claimRetry).
				time.Sleep(time.Minute) // lint:sleep-ok fake time: the keeper's attempts
				synctest.Wait()
				rec, _ := meta.State().Group("g/1")
				if rec.Home != "n1" || rec.Epoch != 2 {
					t.Fatalf("record %+v: want n1 home at epoch 2", rec)
				}
				wantFailed, wantCalls := 2.0, 3
				if commit {
					wantFailed, wantCalls = 1, 1
				}
				if n := testCounter(set.metrics.claimFailures); n != wantFailed {
					t.Errorf("%v failed claims counted, want %v", n, wantFailed)
				}
				meta.mu.Lock()
				calls := meta.attempts
				meta.mu.Unlock()
				if calls != wantCalls {
					t.Errorf("%d claims proposed, want %d", calls, wantCalls)
				}
				if got := rep.transfers(); got != nil {
					t.Errorf("lead handed over: %v", got)
				}
			})
		})
	}
}
