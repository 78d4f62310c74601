package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/netx"
)

// cluster is a group of Metas on one memnet network. Node i lives on host
// 10.0.0.i; each node keeps its data dir across restarts.
type cluster struct {
	t     *testing.T
	nw    *memnet.Network
	dirs  map[string]string
	nodes map[string]*Meta
	tune  func(*Config)
}

func newCluster(t *testing.T, rtt time.Duration) *cluster {
	c := &cluster{
		t:     t,
		nw:    memnet.New(memnet.Options{DefaultRTT: rtt}),
		dirs:  map[string]string{},
		nodes: map[string]*Meta{},
	}
	t.Cleanup(func() {
		for _, m := range c.nodes {
			_ = m.Close()
		}
		_ = c.nw.Close()
	})
	return c
}

func host(id string) string { return "10.0.0." + strings.TrimPrefix(id, "n") }
func addr(id string) string { return host(id) + ":7950" }

func voters(ids ...string) []Server {
	var out []Server
	for _, id := range ids {
		out = append(out, Server{ID: id, Addr: addr(id), Voter: true})
	}
	return out
}

// open starts (or restarts) node id.
func (c *cluster) open(id string, voter bool, bootstrap []Server) *Meta {
	c.t.Helper()
	if c.dirs[id] == "" {
		c.dirs[id] = c.t.TempDir()
	}
	ln, err := c.nw.Listen(addr(id))
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := Config{
		NodeID: id, DataDir: c.dirs[id], Addr: addr(id), Listener: ln,
		Dial:  c.nw.DialFrom(host(id)),
		Voter: voter, Bootstrap: bootstrap,
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	m, err := Open(context.Background(), cfg)
	if err != nil {
		c.t.Fatalf("open %s: %v", id, err)
	}
	c.nodes[id] = m
	return m
}

func (c *cluster) close(id string) {
	c.t.Helper()
	if err := c.nodes[id].Close(); err != nil {
		c.t.Fatalf("close %s: %v", id, err)
	}
	delete(c.nodes, id)
}

// waitFor polls cond in the bubble's fake time.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v", what, within)
		}
		time.Sleep(10 * time.Millisecond) // lint:sleep-ok polls in a synctest bubble's fake time
	}
}

// leader waits until exactly one of the open nodes leads and all agree.
func (c *cluster) leader() *Meta {
	c.t.Helper()
	var lead *Meta
	waitFor(c.t, 30*time.Second, "one agreed leader", func() bool {
		lead = nil
		for _, m := range c.nodes {
			if m.IsLeader() {
				if lead != nil {
					return false
				}
				lead = m
			}
		}
		if lead == nil {
			return false
		}
		for _, m := range c.nodes {
			if id, _ := m.Leader(); id != lead.ID() {
				return false
			}
		}
		return true
	})
	return lead
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func registerCmd(id string) fsm.Command {
	return fsm.RegisterNode(fsm.Node{ID: id, JoinedAt: time.Now(), Labels: fsm.Labels{Tier: fsm.TierEdge, Site: "s1"}})
}

var rules = []fsm.Rule{
	{Match: "swarm/+/telemetry", Mode: fsm.Sequenced, Replicas: 3, Spread: fsm.SpreadZone, Group: "swarm/{1}", LatencyMS: 40},
	{Match: "chat/#", Mode: fsm.Direct},
}

func TestSingleNodeBootstrapsItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 0)
		start := time.Now()
		m := c.open("n1", true, voters("n1"))
		if c.leader() != m {
			t.Fatal("the only node is not the leader")
		}
		t.Logf("single node led after %v", time.Since(start))
		res, err := m.Propose(ctxFor(t, 5*time.Second), fsm.PutPolicies(rules))
		if err != nil {
			t.Fatal(err)
		}
		if res.PoliciesVersion != 1 || m.State().Applied() != res.Index {
			t.Errorf("result %+v, applied %d", res, m.State().Applied())
		}
		vs, err := m.Voters(ctxFor(t, time.Second))
		if err != nil || len(vs) != 1 || vs[0].ID != "n1" || vs[0].Addr != addr("n1") {
			t.Errorf("voters %+v, %v", vs, err)
		}
	})
}

func TestThreeVotersSurviveLossOfOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		if _, err := lead.Propose(ctxFor(t, 5*time.Second), registerCmd("a")); err != nil {
			t.Fatal(err)
		}

		// Lose the leader, the worst voter to lose.
		lost := time.Now()
		c.close(lead.ID())
		next := c.leader()
		t.Logf("new leader %s after %v", next.ID(), time.Since(lost))
		var follower *Meta
		for _, m := range c.nodes {
			if m != next {
				follower = m
			}
		}
		// A write through the follower (forwarded) still commits on the
		// remaining majority.
		res, err := follower.Propose(ctxFor(t, 10*time.Second), registerCmd("b"))
		if err != nil {
			t.Fatalf("write with one voter down: %v", err)
		}
		for _, m := range c.nodes {
			if err := m.Wait(ctxFor(t, 5*time.Second), res.Index); err != nil {
				t.Fatal(err)
			}
			if _, ok := m.State().Node("b"); !ok {
				t.Errorf("%s lacks the write", m.ID())
			}
		}
	})
}

func TestPoliciesReadableOnEveryNodeIncludingNonvoter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 5*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		c.leader()
		edge := c.open("n4", false, nil)
		if err := edge.Join(ctxFor(t, 10*time.Second), []string{addr("n2"), addr("n3")}); err != nil {
			t.Fatal(err)
		}
		servers, err := c.nodes["n1"].Servers(ctxFor(t, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(servers) != 4 || servers[3].ID != "n4" || servers[3].Voter {
			t.Fatalf("servers %+v", servers)
		}

		// Written on the non-voter, forwarded to the leader.
		res, err := edge.Propose(ctxFor(t, 10*time.Second), fsm.PutPoliciesIf(rules, 0))
		if err != nil {
			t.Fatal(err)
		}
		want := fsm.Policies{Version: 1, Rules: rules}
		for id, m := range c.nodes {
			if err := m.Wait(ctxFor(t, 5*time.Second), res.Index); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			got := m.State().Policies()
			if got.Version != want.Version || len(got.Rules) != len(want.Rules) || got.Rules[0].Group != "swarm/{1}" {
				t.Errorf("%s reads %+v", id, got)
			}
			if r := m.State().RuleFor("swarm/9/telemetry"); r.Mode != fsm.Sequenced {
				t.Errorf("%s: rule for swarm/9/telemetry is %+v", id, r)
			}
		}

		// A rejected command keeps its typed error across forwarding.
		_, err = edge.Propose(ctxFor(t, 10*time.Second), fsm.PutPoliciesIf(nil, 0))
		var fe *fsm.Error
		if !errors.Is(err, fsm.ErrConflict) || !errors.As(err, &fe) || fe.Field != "expect_version" {
			t.Errorf("stale CAS through a non-voter: %v", err)
		}
		// An invalid command never leaves the node.
		_, err = edge.Propose(ctxFor(t, time.Second), fsm.PutPolicies([]fsm.Rule{{Match: "a", Mode: "bogus"}}))
		if !errors.Is(err, fsm.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "rules[0].mode" {
			t.Errorf("invalid command: %v", err)
		}
	})
}

func TestRestartedNodeCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		var down string
		for id := range c.nodes {
			if id != lead.ID() {
				down = id
				break
			}
		}
		c.close(down)
		var last fsm.Result
		for i := range 20 {
			var err error
			last, err = lead.Propose(ctxFor(t, 5*time.Second), registerCmd(fmt.Sprintf("x%d", i)))
			if err != nil {
				t.Fatal(err)
			}
		}
		back := c.open(down, true, voters("n1", "n2", "n3"))
		if err := back.Wait(ctxFor(t, 10*time.Second), last.Index); err != nil {
			t.Fatal(err)
		}
		if got, want := back.State().Snapshot(), lead.State().Snapshot(); !bytes.Equal(got, want) {
			t.Errorf("restarted node's state differs:\n got %s\nwant %s", got, want)
		}
	})
}

func TestSnapshotAndRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 0)
		c.tune = func(cfg *Config) { cfg.SnapshotThreshold = 1 << 20; cfg.TrailingLogs = 1 }
		m := c.open("n1", true, voters("n1"))
		c.leader()
		ctx := ctxFor(t, 10*time.Second)
		for i := range 10 {
			if _, err := m.Propose(ctx, registerCmd(fmt.Sprintf("s%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.Propose(ctx, fsm.PutPolicies(rules)); err != nil {
			t.Fatal(err)
		}
		if err := m.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		before := m.State()
		c.close("n1")

		m = c.open("n1", true, voters("n1"))
		// Before any election the state comes from the snapshot alone: the
		// log entries before it were compacted away (TrailingLogs 1).
		if got := m.State(); !bytes.Equal(got.Snapshot(), before.Snapshot()) {
			t.Fatalf("state after reopen:\n got %s\nwant %s", got.Snapshot(), before.Snapshot())
		}
		c.leader()
		res, err := m.Propose(ctx, registerCmd("after"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Index <= before.Applied() || len(m.State().Nodes()) != 11 {
			t.Errorf("write after restore: index %d (snapshot at %d), %d nodes", res.Index, before.Applied(), len(m.State().Nodes()))
		}
	})
}

func TestSnapshotCatchesUpNewNonvoter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		c.tune = func(cfg *Config) { cfg.SnapshotThreshold = 1 << 20; cfg.TrailingLogs = 1 }
		lead := c.open("n1", true, voters("n1"))
		c.leader()
		ctx := ctxFor(t, 10*time.Second)
		for i := range 5 {
			if _, err := lead.Propose(ctx, registerCmd(fmt.Sprintf("s%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := lead.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		// The new member can only catch up by installing the snapshot.
		edge := c.open("n2", false, nil)
		if err := lead.AddNonvoter(ctx, "n2", addr("n2")); err != nil {
			t.Fatal(err)
		}
		if err := edge.Wait(ctx, lead.State().Applied()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(edge.State().Snapshot(), lead.State().Snapshot()) {
			t.Errorf("non-voter state differs after snapshot install")
		}
	})
}

// TestTCP runs one node over real loopback TCP (the production stream
// layer), outside any bubble.
func TestTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	m, err := Open(context.Background(), Config{
		NodeID: "solo", DataDir: t.TempDir(), Addr: a, Listener: ln, Dial: netx.DialTCP,
		Voter: true, Bootstrap: []Server{{ID: "solo", Addr: a}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Propose retries until the node has elected itself.
	res, err := m.Propose(ctx, registerCmd("tcp"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.State().Node("tcp"); !ok || res.Index == 0 {
		t.Errorf("result %+v, state %s", res, m.State().Snapshot())
	}
}

func TestConfigValidate(t *testing.T) {
	ln, _ := memnet.New(memnet.Options{}).Listen("10.0.0.1:1")
	dial := func(context.Context, string) (net.Conn, error) { return nil, errors.New("no") }
	ok := Config{NodeID: "a", DataDir: "/tmp/x", Addr: "10.0.0.1:1", Listener: ln, Dial: dial}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no id":       func(c *Config) { c.NodeID = "" },
		"no dir":      func(c *Config) { c.DataDir = "" },
		"no listener": func(c *Config) { c.Listener = nil },
		"even voters": func(c *Config) { c.Bootstrap = voters("n1", "n2") },
		"duplicate": func(c *Config) {
			c.Bootstrap = []Server{{ID: "x", Addr: "1"}, {ID: "x", Addr: "2"}, {ID: "y", Addr: "3"}}
		},
		"self elsewhere": func(c *Config) { c.Bootstrap = []Server{{ID: "a", Addr: "10.0.0.9:1"}} },
		"timing":         func(c *Config) { c.Timing = 7 },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestIsolatedLeaderIsReplacedAndCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2*time.Millisecond)
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		old := c.leader()
		c.nw.Isolate(host(old.ID()))
		cut := time.Now()

		// The isolated leader cannot commit.
		short, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := old.Propose(short, registerCmd("lost")); err == nil {
			t.Fatal("an isolated leader committed a write")
		}

		// The majority elects a new leader and commits.
		var next *Meta
		waitFor(t, 30*time.Second, "a new leader on the majority side", func() bool {
			for _, m := range c.nodes {
				if m != old && m.IsLeader() {
					next = m
					return true
				}
			}
			return false
		})
		t.Logf("%s took over %v after %s was isolated", next.ID(), time.Since(cut), old.ID())
		res, err := next.Propose(ctxFor(t, 10*time.Second), registerCmd("kept"))
		if err != nil {
			t.Fatal(err)
		}

		c.nw.Rejoin(host(old.ID()))
		if err := old.Wait(ctxFor(t, 30*time.Second), res.Index); err != nil {
			t.Fatal(err)
		}
		if _, ok := old.State().Node("lost"); ok {
			t.Error("the uncommitted write of the isolated leader survived")
		}
		if !bytes.Equal(old.State().Snapshot(), next.State().Snapshot()) {
			t.Error("the rejoined node's state differs from the leader's")
		}
	})
}
