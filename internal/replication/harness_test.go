package replication

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/memnet"
)

var (
	seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0: the fixed default seed)")
	update   = flag.Bool("update", false, "rewrite golden files")
)

// testSeed returns the run's seed and prints it.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	return seed
}

// recorder is a test state machine: it records every command it applies
// and every violation of the FSM contract it sees (an entry applied twice,
// indexes going backwards). It stands for a durable state machine when a
// test keeps it across a restart of its group, and for a volatile one when
// the test gives the restarted group a new recorder.
type recorder struct {
	mu struct {
		sync.Mutex
		applied    uint64
		cmds       []string
		indexes    []uint64
		batches    []int
		violations []string
		restores   int
		failAt     uint64 // Apply fails when it reaches this index (0: never)
		noop       string // commands with this prefix change nothing (as a deduplicated publish)
		noops      int    // such commands applied
	}
}

var _ FSM[uint64] = (*recorder)(nil)

func (r *recorder) Applied() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.applied
}

// Apply records the commands; each result is the command's position in
// the state (1, 2, ...), which every replica must agree on.
func (r *recorder) Apply(entries []Entry) ([]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]uint64, 0, len(entries))
	r.mu.batches = append(r.mu.batches, len(entries))
	for _, e := range entries {
		if r.mu.failAt != 0 && e.Index >= r.mu.failAt {
			return nil, errors.New("injected storage failure")
		}
		if r.mu.noop != "" && strings.HasPrefix(string(e.Cmd), r.mu.noop) {
			r.mu.noops++
			out = append(out, 0)
			continue
		}
		if e.Index <= r.mu.applied {
			r.mu.violations = append(r.mu.violations, fmt.Sprintf("index %d applied again (state at %d)", e.Index, r.mu.applied))
		}
		r.mu.applied = e.Index
		r.mu.cmds = append(r.mu.cmds, string(e.Cmd))
		r.mu.indexes = append(r.mu.indexes, e.Index)
		out = append(out, uint64(len(r.mu.cmds)))
	}
	return out, nil
}

type recorderState struct {
	Applied uint64   `json:"applied"`
	Cmds    []string `json:"cmds"`
	Indexes []uint64 `json:"indexes"`
}

type recorderSnapshot struct{ st recorderState }

func (s recorderSnapshot) Persist(w io.Writer) error { return json.NewEncoder(w).Encode(s.st) }
func (s recorderSnapshot) Release()                  {}

func (r *recorder) Snapshot() (Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorderSnapshot{recorderState{Applied: r.mu.applied, Cmds: slices.Clone(r.mu.cmds), Indexes: slices.Clone(r.mu.indexes)}}, nil
}

func (r *recorder) Restore(rd io.Reader) error {
	var st recorderState
	if err := json.NewDecoder(rd).Decode(&st); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.applied, r.mu.cmds, r.mu.indexes = st.Applied, st.Cmds, st.Indexes
	r.mu.restores++
	return nil
}

func (r *recorder) cmds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.cmds)
}

func (r *recorder) violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.violations)
}

func (r *recorder) restores() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.restores
}

// cluster is a set of engines on one memnet network, each running replica
// group "pg/1". Node nI lives on host 10.0.0.I and keeps its data dir and
// its recorder across restarts.
type cluster struct {
	t       *testing.T
	nw      *memnet.Network
	group   GroupID
	dirs    map[string]string
	regs    map[string]*prometheus.Registry
	engines map[string]*Engine
	groups  map[string]*Group[uint64]
	fsms    map[string]*recorder
	tune    func(*Config)
}

func newCluster(t *testing.T, rtt time.Duration) *cluster {
	c := &cluster{
		t: t, nw: memnet.New(memnet.Options{DefaultRTT: rtt}), group: "pg/1",
		dirs: map[string]string{}, regs: map[string]*prometheus.Registry{},
		engines: map[string]*Engine{}, groups: map[string]*Group[uint64]{}, fsms: map[string]*recorder{},
	}
	t.Cleanup(func() {
		for _, e := range c.engines {
			_ = e.Close()
		}
		_ = c.nw.Close()
	})
	return c
}

func host(id string) string { return "10.0.0." + strings.TrimPrefix(id, "n") }
func addr(id string) string { return host(id) + ":7950" }

func members(ids ...string) []Member {
	var out []Member
	for _, id := range ids {
		out = append(out, Member{ID: id, Addr: addr(id), Voter: true})
	}
	return out
}

func ids(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

// engine starts node id's engine (again).
func (c *cluster) engine(id string) *Engine {
	c.t.Helper()
	if e := c.engines[id]; e != nil {
		return e
	}
	if c.dirs[id] == "" {
		c.dirs[id] = c.t.TempDir()
	}
	ln, err := c.nw.Listen(addr(id))
	if err != nil {
		c.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := Config{
		NodeID: id, Addr: addr(id), Listener: ln, Dial: c.nw.DialFrom(host(id)),
		DataDir: c.dirs[id], Registerer: reg,
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		c.t.Fatalf("engine %s: %v", id, err)
	}
	c.engines[id], c.regs[id] = e, reg
	return e
}

// open opens node id's replica of the group with its recorder (a new one
// the first time, or when fresh is set: a volatile state machine).
func (c *cluster) open(id string, fresh bool) *Group[uint64] {
	c.t.Helper()
	if c.fsms[id] == nil || fresh {
		c.fsms[id] = &recorder{}
	}
	g, err := OpenGroup(context.Background(), c.engine(id), c.group, FSM[uint64](c.fsms[id]))
	if err != nil {
		c.t.Fatalf("open %s: %v", id, err)
	}
	c.groups[id] = g
	return g
}

// start opens and bootstraps a group of the given voters.
func (c *cluster) start(voters ...string) {
	c.t.Helper()
	for _, id := range voters {
		if err := c.open(id, false).Bootstrap(ctxFor(c.t, time.Second), members(voters...)); err != nil {
			c.t.Fatalf("bootstrap %s: %v", id, err)
		}
	}
}

// kill stops node id as kill -9 would, seen from the others: its engine
// closes without handing anything over, its connections and listener
// close (the peers' next reads and dials fail at once, as when the
// kernel resets a dead process's sockets), and it sends nothing more.
func (c *cluster) kill(id string) {
	c.t.Helper()
	if err := c.engines[id].Close(); err != nil {
		c.t.Fatalf("kill %s: %v", id, err)
	}
	delete(c.engines, id)
	delete(c.groups, id)
}

// restart brings a killed node back with its data dir and recorder.
func (c *cluster) restart(id string) *Group[uint64] {
	c.t.Helper()
	return c.open(id, false)
}

// waitFor polls cond in the bubble's fake time.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v", what, within)
		}
		time.Sleep(time.Millisecond) // lint:sleep-ok polls in a synctest bubble's fake time
	}
}

// leader waits until exactly one replica leads and every running replica
// agrees.
func (c *cluster) leader() (string, *Group[uint64]) {
	c.t.Helper()
	var all []string
	for id := range c.groups {
		all = append(all, id)
	}
	return c.leaderAmong(all...)
}

// leaderAmong waits until exactly one of the replicas on nodes ids leads
// and all of them agree.
func (c *cluster) leaderAmong(ids ...string) (string, *Group[uint64]) {
	c.t.Helper()
	var lead string
	waitFor(c.t, 30*time.Second, "one agreed leader", func() bool {
		lead = ""
		for _, id := range ids {
			if c.groups[id].IsLeader() {
				if lead != "" {
					return false
				}
				lead = id
			}
		}
		if lead == "" {
			return false
		}
		for _, id := range ids {
			if c.groups[id].Leader().ID != lead {
				return false
			}
		}
		return true
	})
	return lead, c.groups[lead]
}

// converge waits until every running replica holds the same commands as
// the leader and no state machine saw a contract violation.
func (c *cluster) converge() []string {
	c.t.Helper()
	_, lead := c.leader()
	want := lead.Stats().CommitIndex
	waitFor(c.t, 30*time.Second, "replicas apply up to the leader's commit index", func() bool {
		for _, g := range c.groups {
			if g.Stats().Applied < c.fsms[lead.e.cfg.NodeID].Applied() || g.raft.AppliedIndex() < want {
				return false
			}
		}
		return true
	})
	ref := c.fsms[lead.e.cfg.NodeID].cmds()
	for id := range c.groups {
		if got := c.fsms[id].cmds(); !slices.Equal(got, ref) {
			c.t.Fatalf("%s holds %d commands, the leader %d; first difference at %d", id, len(got), len(ref), firstDiff(got, ref))
		}
		if v := c.fsms[id].violations(); len(v) > 0 {
			c.t.Fatalf("%s: state machine contract violated: %v", id, v)
		}
	}
	return ref
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// counter reads a counter of node id's registry.
func (c *cluster) counter(id, name string, labels ...string) float64 {
	c.t.Helper()
	mfs, err := c.regs[id].Gather()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() != labels[i+1] {
						match = false
					}
				}
			}
			if match {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		return sum
	}
	return 0
}

// proposeAll proposes cmds from one goroutine in order, submitting them
// all before waiting (a pipelined publisher), and returns the results.
func proposeAll(ctx context.Context, g Replica[uint64], cmds []string) ([]uint64, error) {
	var ps []*Pending[uint64]
	for _, cmd := range cmds {
		p, err := g.Submit(ctx, []byte(cmd))
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	var out []uint64
	for _, p := range ps {
		r, err := p.Wait(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// publishConcurrently runs pipelined publishers, each proposing each
// commands (publisherCmd(p, 0), ...) in order, and returns each one's
// results.
func publishConcurrently(t *testing.T, r Replica[uint64], publishers, each int) [][]uint64 {
	t.Helper()
	results := make([][]uint64, publishers)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			var cmds []string
			for i := range each {
				cmds = append(cmds, publisherCmd(p, i))
			}
			res, err := proposeAll(ctxFor(t, 10*time.Second), r, cmds)
			if err != nil {
				t.Errorf("publisher %d: %v", p, err)
			}
			results[p] = res
		})
	}
	wg.Wait()
	return results
}

func publisherCmd(p, i int) string { return fmt.Sprintf("p%d-%03d", p, i) }

// checkPublishers checks that log holds every publisher's commands, that
// no publisher's commands were reordered and that each result is its
// command's position in log.
func checkPublishers(t *testing.T, log []string, results [][]uint64) {
	t.Helper()
	pos := map[string]uint64{}
	for i, cmd := range log {
		pos[cmd] = uint64(i + 1)
	}
	n := 0
	for p, res := range results {
		n += len(res)
		if !slices.IsSorted(res) {
			t.Errorf("publisher %d's commands were reordered: %v", p, res)
		}
		for i, r := range res {
			if want := pos[publisherCmd(p, i)]; r != want {
				t.Errorf("publisher %d command %d: result %d, position in the log %d", p, i, r, want)
			}
		}
	}
	if len(log) != n {
		t.Errorf("%d commands in the log, %d acknowledged", len(log), n)
	}
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)) }
