package replication

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestSingleAppliesInOrderInBatches: a Single applies each publisher's
// commands in submission order, numbers entries from the state machine's
// applied index, applies concurrent commands in shared batches, and is
// always its own leader.
func TestSingleAppliesInOrderInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &recorder{}
		f.mu.applied = 100 // the state machine already holds entries up to 100
		s, err := NewSingle[uint64]("pg/1", f, SingleConfig{NodeID: "n1", Addr: addr("n1")})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if l := <-s.Leadership(); !l.Local || l.ID != "n1" || !s.IsLeader() {
			t.Errorf("leader %+v", l)
		}
		results := publishConcurrently(t, s, 8, 50)
		cmds := f.cmds()
		if len(cmds) != 400 {
			t.Fatalf("%d commands", len(cmds))
		}
		checkPublishers(t, cmds, results)
		f.mu.Lock()
		indexes, batches := slices.Clone(f.mu.indexes), slices.Clone(f.mu.batches)
		f.mu.Unlock()
		for i, ix := range indexes {
			if ix != uint64(101+i) {
				t.Fatalf("entry %d has index %d, want %d", i, ix, 101+i)
			}
		}
		if slices.Max(batches) < 2 {
			t.Errorf("concurrent proposals never shared a batch: %v", batches)
		}
		t.Logf("%d commands in %d batches (largest %d)", len(cmds), len(batches), slices.Max(batches))
		if st := s.Stats(); st.Applied != 500 || st.Role != RoleLeader {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestSingleCloseAndFailure: commands queued at Close get ErrClosed; a
// state machine error fails its batch and every later command with
// ErrFailed.
func TestSingleCloseAndFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &recorder{}
		s, err := NewSingle[uint64]("pg/1", f, SingleConfig{NodeID: "n1", Addr: addr("n1")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Propose(context.Background(), []byte("a")); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.mu.failAt = 2
		f.mu.Unlock()
		if _, err := s.Propose(context.Background(), []byte("b")); !errors.Is(err, ErrFailed) {
			t.Errorf("failed apply: %v", err)
		}
		if _, err := s.Submit(context.Background(), []byte("c")); !errors.Is(err, ErrFailed) && err != nil {
			t.Errorf("after failure: %v", err)
		} else if err == nil {
			t.Error("a failed single took a command")
		}
		_ = s.Close()

		s, err = NewSingle[uint64]("pg/2", &recorder{}, SingleConfig{NodeID: "n1", Addr: addr("n1"), QueueDepth: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Submit(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
			t.Errorf("submit after close: %v", err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 0)
		ln, err := c.nw.Listen("10.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		ok := Config{NodeID: "n1", Addr: "10.0.0.1:1", Listener: ln, Dial: c.nw.DialFrom("10.0.0.1"), DataDir: t.TempDir()}
		if err := ok.Validate(); err != nil {
			t.Fatal(err)
		}
		for name, mut := range map[string]func(*Config){
			"no id":       func(c *Config) { c.NodeID = "" },
			"long id":     func(c *Config) { c.NodeID = string(make([]byte, 256)) },
			"no addr":     func(c *Config) { c.Addr = "" },
			"@ in addr":   func(c *Config) { c.Addr = "a@b:1" },
			"no listener": func(c *Config) { c.Listener = nil },
			"no dial":     func(c *Config) { c.Dial = nil },
			"no dir":      func(c *Config) { c.DataDir = "" },
			"batch":       func(c *Config) { c.MaxBatch = 2000 },
			"pipeline":    func(c *Config) { c.Pipeline = maxPipeline + 1 },
			"pipeline -1": func(c *Config) { c.Pipeline = -1 },
			"budget":      func(c *Config) { c.MaxGroups = -1 },
			"segment":     func(c *Config) { c.SegmentBytes = 1000 },
			"heartbeat": func(c *Config) {
				c.Timeouts = Timeouts{Heartbeat: time.Millisecond, Election: time.Second, LeaderLease: 5 * time.Millisecond, Commit: time.Millisecond}
			},
			"election":       func(c *Config) { c.Timeouts = LAN(); c.Timeouts.Election = c.Timeouts.Heartbeat / 2 },
			"lease":          func(c *Config) { c.Timeouts = LAN(); c.Timeouts.LeaderLease = c.Timeouts.Heartbeat + 1 },
			"commit":         func(c *Config) { c.Timeouts = LAN(); c.Timeouts.Commit = 0 },
			"partial timing": func(c *Config) { c.Timeouts = Timeouts{Heartbeat: time.Second} },
		} {
			c := ok
			mut(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("%s: %v", name, err)
			}
		}
		for _, tt := range []Timeouts{{}, LAN(), WAN()} {
			if err := tt.Validate(); err != nil {
				t.Errorf("%+v: %v", tt, err)
			}
		}
		for _, id := range []GroupID{"", "a\nb", GroupID(make([]byte, 256))} {
			if err := id.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("group id %q: %v", id, err)
			}
		}
		if got := GroupID("swarm/../7.x").DirName(); got != "swarm%2F%2E%2E%2F7%2Ex" {
			t.Errorf("dir name %q", got)
		}
	})
}

// TestEngineBudgetAndDelete: the engine refuses groups beyond its budget
// and a second open of one group; Delete frees a group's place and storage.
func TestEngineBudgetAndDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 0)
		c.tune = func(cfg *Config) { cfg.MaxGroups = 2 }
		e := c.engine("n1")
		a, err := OpenGroup(context.Background(), e, "a", FSM[uint64](&recorder{}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OpenGroup(context.Background(), e, "a", FSM[uint64](&recorder{})); !errors.Is(err, ErrExists) {
			t.Errorf("second open: %v", err)
		}
		if _, err := OpenGroup(context.Background(), e, "b", FSM[uint64](&recorder{})); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenGroup(context.Background(), e, "c", FSM[uint64](&recorder{})); !errors.Is(err, ErrBudget) {
			t.Errorf("third group: %v", err)
		}
		if err := a.Bootstrap(ctxFor(t, time.Second), members("n1")); err != nil {
			t.Fatal(err)
		}
		if err := a.Bootstrap(ctxFor(t, time.Second), members("n1")); !errors.Is(err, ErrBootstrapped) {
			t.Errorf("second bootstrap: %v", err)
		}
		if err := e.Delete("a"); err != nil {
			t.Fatal(err)
		}
		a, err = OpenGroup(context.Background(), e, "a", FSM[uint64](&recorder{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Bootstrap(ctxFor(t, time.Second), members("n1")); err != nil {
			t.Errorf("bootstrap after delete: %v", err)
		}
		if err := a.Bootstrap(ctxFor(t, time.Second), members("n2")); !errors.Is(err, ErrConfig) {
			t.Errorf("bootstrap without this node: %v", err)
		}
	})
}
