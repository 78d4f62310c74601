package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/monitor/agent"
	"github.com/sextantmq/sextant/internal/node"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/store"
)

// Ports every node uses on its own host: the cluster address (gossip,
// metadata group and peer links, as in production) and MQTT.
const (
	clusterPort = 7950
	mqttPort    = 1883
)

// Options tune a test cluster.
type Options struct {
	// Store gives every node its bbolt store (kept across Restart); without
	// it nodes persist nothing (node.Options.Ephemeral).
	Store bool
	// Config adjusts each node's configuration (the defaults, with the
	// changes nodeConfig lists) before the node is built.
	Config func(*config.Config)
	// Peer tunes the peer links.
	Peer peer.Options
	// Seed seeds the network's loss and the links' jitter (default 1).
	Seed uint64
	// Cluster adjusts each node's cluster layer config before it starts.
	Cluster func(*cluster.Config)
	// GroupSegmentBytes sets node.Options.GroupSegmentBytes.
	GroupSegmentBytes int64
	// BreakAfter is how long a connection stalled by a cut lasts before the
	// network resets it (memnet.Options.BreakAfter; default 10 s).
	BreakAfter time.Duration
	// Placement adjusts each node's monitoring agent (node.Options.Placement),
	// given the node's id: tests fake its process load.
	Placement func(node string, c *agent.Config)
}

// Cluster is a set of in-process nodes on one memnet network, each built
// by node.New as `sextant serve` builds one, on its own host of the
// network. Create it inside a testing/synctest bubble: gossip, failure
// detection, the metadata group's Raft, link backoff and latency then run
// on fake time (outside one, its cleanup would wait two real minutes for
// gossip timers to expire).
type Cluster struct {
	T     *testing.T
	Net   *memnet.Network
	opts  Options
	nodes []*Node
	log   *slog.Logger
}

// Node is one in-process node (a node.Node) on host "10.0.0.<i+1>". Its
// part fields are those of the current run: Restart replaces them.
type Node struct {
	ID, Host string
	Index    int
	Node     *node.Node
	Broker   *broker.Broker
	Cluster  *cluster.Layer
	Store    *store.Store // nil without Options.Store
	Metrics  *metrics.Node
	c        *Cluster
	dataDir  string

	mu      sync.Mutex
	running bool
}

// Start starts n nodes, joined into one cluster, and waits until every node
// sees every other alive with a connected link. rtt, if not nil, is the
// round-trip time matrix between the nodes' hosts.
func Start(t *testing.T, n int, rtt [][]time.Duration, opts ...func(*Options)) *Cluster {
	t.Helper()
	var o Options
	for _, f := range opts {
		f(&o)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	t.Logf("clustertest: %d nodes, seed %d", n, o.Seed)
	c := &Cluster{T: t, opts: o, Net: memnet.New(memnet.Options{Seed: o.Seed, DefaultRTT: time.Millisecond, BreakAfter: o.BreakAfter}), log: testLogger()}
	if rtt != nil {
		if err := c.Net.SetMatrix(c.hosts(n), rtt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.stop()
		}
		_ = c.Net.Close()
		// Gossip leaves probe and dial timers behind after Shutdown; let
		// fake time run on so they fire before the bubble ends.
		settle := time.NewTimer(2 * time.Minute)
		<-settle.C
	})
	for i := range n {
		nd := &Node{ID: fmt.Sprintf("n%d", i+1), Host: hostOf(i), Index: i, c: c, dataDir: t.TempDir()}
		c.nodes = append(c.nodes, nd)
		if err := nd.start(); err != nil {
			t.Fatalf("clustertest: start %s: %v", nd.ID, err)
		}
	}
	c.WaitConverged()
	return c
}

func testLogger() *slog.Logger {
	if os.Getenv("SEXTANT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func hostOf(i int) string { return fmt.Sprintf("10.0.0.%d", i+1) }

func (c *Cluster) hosts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = hostOf(i)
	}
	return out
}

// Node returns node i (0-based).
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Nodes returns every node, running or not.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// running returns the nodes currently running.
func (c *Cluster) running() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// nodeConfig is the node's configuration: the defaults, on its host of the
// network, joining through a running node, with what a test cluster
// changes: every client of a node comes from the node's own host, so no
// per-address or publish-rate limits (and anonymous clients are allowed);
// no $SYS, admin API or WebSocket listener; nothing fsynced; and the wan
// timing, whose slower Raft heartbeats and gossip probes cost less CPU per
// second of fake time (an idle metadata group on the lan timing replicates
// to every member 50 times a second), which keeps the suite as fast as it
// was before the harness ran the metadata group.
func (n *Node) nodeConfig() config.Config {
	cfg := config.Default()
	cfg.NodeID = n.ID
	cfg.DataDir = n.dataDir
	cfg.ClusterAddr = fmt.Sprintf("%s:%d", n.Host, clusterPort)
	cfg.MQTTAddr = fmt.Sprintf("%s:%d", n.Host, mqttPort)
	cfg.WSAddr, cfg.AdminAddr = "", ""
	cfg.Site, cfg.Zone, cfg.Tier = "s"+n.ID, "z", membership.TierEdge
	cfg.AllowAnonymous = "true"
	cfg.MaxConnections = 100000
	cfg.MaxConnsPerIP, cfg.ConnectRatePerIP = 0, 0
	cfg.PublishRate, cfg.PublishBytes = 0, 0
	cfg.AuthFailDelay = 0
	cfg.SysInterval = 0
	cfg.Fsync = "never"
	cfg.ClusterTiming = "wan"
	for _, o := range n.c.running() {
		if o != n {
			cfg.Join = []string{fmt.Sprintf("%s:%d", o.Host, clusterPort)}
			break
		}
	}
	if n.c.opts.Config != nil {
		n.c.opts.Config(&cfg)
	}
	return cfg
}

// start builds the node through node.New and starts it.
func (n *Node) start() error {
	c := n.c
	nd, err := node.New(n.nodeConfig(), node.Options{
		Log: c.log.With("node", n.ID), Version: "test", Network: c.Net.Host(n.Host),
		Seed: c.opts.Seed + uint64(n.Index), Ephemeral: !c.opts.Store, GroupSegmentBytes: c.opts.GroupSegmentBytes,
		Placement: func(a *agent.Config) {
			if c.opts.Placement != nil {
				c.opts.Placement(n.ID, a)
			}
		},
		Cluster: func(cfg *cluster.Config) {
			cfg.Peer = c.opts.Peer
			if c.opts.Cluster != nil {
				c.opts.Cluster(cfg)
			}
		},
	})
	if err != nil {
		return err
	}
	if err := nd.Start(); err != nil {
		return err
	}
	n.mu.Lock()
	n.Node, n.Broker, n.Cluster, n.Store, n.Metrics = nd, nd.Broker(), nd.ClusterLayer(), nd.Store(), nd.Metrics()
	n.running = true
	n.mu.Unlock()
	return nil
}

// Running reports whether the node is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running
}

// stop shuts the node down without a graceful leave (node.Halt): the
// others see it fail. Safe to call twice.
func (n *Node) stop() {
	n.mu.Lock()
	if !n.running {
		n.mu.Unlock()
		return
	}
	n.running = false
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.Node.Halt(ctx)
}

// Kill stops node i abruptly, as a crashed process: no graceful leave, its
// connections close. The others detect the failure through gossip.
func (c *Cluster) Kill(i int) {
	c.T.Helper()
	c.nodes[i].stop()
}

// Restart starts a stopped node again on the same host and data directory,
// joining through a running node, and waits for the cluster to converge.
func (c *Cluster) Restart(i int) {
	c.T.Helper()
	n := c.nodes[i]
	if n.Running() {
		c.T.Fatalf("clustertest: restart %s: still running", n.ID)
	}
	c.Net.Rejoin(n.Host)
	if err := n.start(); err != nil {
		c.T.Fatalf("clustertest: restart %s: %v", n.ID, err)
	}
	c.WaitConverged()
}

// Partition cuts nodes i and j apart; Heal undoes it.
func (c *Cluster) Partition(i, j int) { c.Net.Partition(hostOf(i), hostOf(j)) }

// Heal undoes Partition(i, j) and CutOneWay between i and j either way.
func (c *Cluster) Heal(i, j int) { c.Net.Heal(hostOf(i), hostOf(j)) }

// CutOneWay cuts the traffic from node i to node j only.
func (c *Cluster) CutOneWay(i, j int) { c.Net.CutOneWay(hostOf(i), hostOf(j)) }

// Break resets the connections between nodes i and j (nothing stays cut).
func (c *Cluster) Break(i, j int) { c.Net.Break(hostOf(i), hostOf(j)) }

// Isolate cuts node i off from every other node (its clients, on its own
// host, still reach it).
func (c *Cluster) Isolate(i int) { c.Net.Isolate(hostOf(i)) }

// Rejoin undoes Isolate(i).
func (c *Cluster) Rejoin(i int) { c.Net.Rejoin(hostOf(i)) }

// SetRTT sets the round-trip time between nodes i and j.
func (c *Cluster) SetRTT(i, j int, rtt time.Duration) { c.Net.SetRTT(hostOf(i), hostOf(j), rtt) }

// WaitConverged waits until every running node sees exactly the running
// nodes alive and has a connected link to each, and the interest each
// announced has reached the others.
func (c *Cluster) WaitConverged() {
	c.T.Helper()
	c.Eventually("cluster converged", func() bool {
		run := c.running()
		ids := make([]string, len(run))
		for i, n := range run {
			ids[i] = n.ID
		}
		slices.Sort(ids)
		for _, n := range run {
			if !slices.Equal(n.Cluster.Alive(), ids) {
				return false
			}
			for _, o := range run {
				if o == n {
					continue
				}
				if l := n.Cluster.Peers().Link(o.ID); l == nil || !l.Up() {
					return false
				}
			}
		}
		return true
	})
}

// Eventually polls cond until it holds, failing the test after Timeout. In
// a bubble the polling runs on fake time.
func (c *Cluster) Eventually(what string, cond func() bool) {
	c.T.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.T.Fatalf("clustertest: %s: not true within %v", what, Timeout)
		}
		t := time.NewTimer(10 * time.Millisecond)
		<-t.C
	}
}

// Connect connects an MQTT client to the node, from the node's own host,
// and fails the test if it is refused. The client is closed at the end of
// the test.
func (n *Node) Connect(clientID string, o ConnectOptions) *Client {
	n.c.T.Helper()
	cl, err := n.TryConnect(clientID, o)
	if err != nil {
		n.c.T.Fatal(err)
	}
	return cl
}

// TryConnect is Connect returning the error.
func (n *Node) TryConnect(clientID string, o ConnectOptions) (*Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	conn, err := n.c.Net.Dial(ctx, n.Host, fmt.Sprintf("%s:%d", n.Host, mqttPort))
	if err != nil {
		return nil, fmt.Errorf("clustertest: dial %s: %w", n.ID, err)
	}
	cl, err := connect(n.c.T, conn, clientID, o)
	if cl != nil && err == nil {
		n.c.T.Cleanup(func() { _ = cl.conn.Close(); <-cl.Done })
	}
	return cl, err
}

// Interest returns what this node knows of every peer's interest.
func (n *Node) Interest() map[string][]string { return n.Cluster.RemoteInterest() }

// HasInterest reports whether this node knows that node `from` announced
// filter.
func (n *Node) HasInterest(from, filter string) bool {
	return slices.Contains(n.Cluster.RemoteInterest()[from], filter)
}

// Gather reads a counter or gauge from the node's registry (summing every
// series of the name whose labels include those given).
func (n *Node) Gather(name string, labels map[string]string) float64 {
	mfs, err := n.Metrics.Registry.Gather()
	if err != nil {
		n.c.T.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
