package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/listener"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// Ports every node uses on its own host.
const (
	gossipPort = 7946
	peerPort   = 7950
	mqttPort   = 1883
)

// Options tune a test cluster.
type Options struct {
	// Store gives every node a bbolt store in a temporary directory (kept
	// across Restart); without it nodes persist nothing.
	Store bool
	// Limits are the brokers' session limits (default: Limits()).
	Limits *session.Limits
	// Peer tunes the peer links.
	Peer peer.Options
	// Seed seeds the network's loss and the links' jitter (default 1).
	Seed uint64
	// Cluster adjusts each node's cluster layer config before it starts.
	Cluster func(*cluster.Config)
}

// Limits returns session limits for tests: the node's defaults, with
// persistent sessions allowed and keep alive not enforced.
func Limits() session.Limits {
	return session.Limits{
		MaxPacketSize: 1 << 20, ReceiveMaximum: 1024, MaxInflight: 1024,
		MaxQueued: 10000, MaxStored: 100000, TopicAliasMaximum: 64, MaxKeepAlive: 65535,
		MaxSubscriptions: 1000, MaxTopicLength: 65535, MaxTopicLevels: 128, MaxClientIDLength: 256,
		ConnectTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, SlowConsumer: 5 * time.Second,
	}
}

// Cluster is a set of in-process nodes on one memnet network. Create it
// inside a testing/synctest bubble: gossip, failure detection and link
// backoff then run on fake time (outside one, its cleanup would wait two
// real minutes for gossip timers to expire).
type Cluster struct {
	T     *testing.T
	Net   *memnet.Network
	opts  Options
	nodes []*Node
	log   *slog.Logger
}

// Node is one in-process node: a broker with its cluster layer, membership
// and listeners on host "10.0.0.<i+1>".
type Node struct {
	ID, Host string
	Index    int
	Broker   *broker.Broker
	Cluster  *cluster.Layer
	Members  *membership.Membership
	Store    *store.Store
	Metrics  *metrics.Node
	c        *Cluster
	dataDir  string
	mux      *peer.Mux
	mqtt     *listener.Server

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
	c := &Cluster{T: t, opts: o, Net: memnet.New(memnet.Options{Seed: o.Seed, DefaultRTT: time.Millisecond}), log: testLogger()}
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
		nd := &Node{ID: fmt.Sprintf("n%d", i+1), Host: hostOf(i), Index: i, c: c}
		if o.Store {
			nd.dataDir = t.TempDir()
		}
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

// start builds and starts the node's parts.
func (n *Node) start() error {
	c := n.c
	lim := Limits()
	if c.opts.Limits != nil {
		lim = *c.opts.Limits
	}
	n.Metrics = metrics.NewNode()
	var st broker.Store
	if n.dataDir != "" {
		s, err := store.Open(filepath.Join(n.dataDir, "sextant.db"), store.Options{Fsync: store.FsyncNever})
		if err != nil {
			return err
		}
		n.Store, st = s, s
	}
	b, err := broker.New(broker.Config{Limits: lim, MaxConnections: 100000, Version: "test"}, st, clock.Real{}, c.log.With("node", n.ID), n.Metrics)
	if err != nil {
		return err
	}
	n.Broker = b

	peerLn, err := c.Net.Listen(fmt.Sprintf("%s:%d", n.Host, peerPort))
	if err != nil {
		return err
	}
	n.mux = peer.NewMux(peerLn, 0, c.log)
	links := n.mux.Listener(peer.Kind)
	n.mux.Start()

	gossip := fmt.Sprintf("%s:%d", n.Host, gossipPort)
	pc, err := c.Net.ListenPacket(gossip)
	if err != nil {
		return err
	}
	gl, err := c.Net.Listen(gossip)
	if err != nil {
		return err
	}
	tr, err := membership.NewTransport(pc, gl, c.Net.DialFrom(n.Host), nil)
	if err != nil {
		return err
	}
	var join []string
	for _, o := range c.running() {
		if o != n {
			join = append(join, fmt.Sprintf("%s:%d", o.Host, gossipPort))
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	n.Members, err = membership.Start(ctx, membership.Config{
		NodeID: n.ID, Transport: tr, Join: join,
		Tags: membership.Labels{Site: "s" + n.ID, Zone: "z", Tier: membership.TierEdge,
			MQTTAddr: fmt.Sprintf("%s:%d", n.Host, mqttPort), PeerAddr: fmt.Sprintf("%s:%d", n.Host, peerPort)},
	})
	if err != nil {
		return err
	}
	cfg := cluster.Config{
		NodeID: n.ID, Deliver: b, Retained: b, Sessions: b, Members: n.Members, Listener: links, Dial: c.Net.DialFrom(n.Host),
		Registerer: n.Metrics.Registry, Log: c.log.With("node", n.ID), Seed: c.opts.Seed + uint64(n.Index),
		Peer: c.opts.Peer,
	}
	if c.opts.Cluster != nil {
		c.opts.Cluster(&cfg)
	}
	n.Cluster, err = cluster.New(cfg)
	if err != nil {
		return err
	}
	b.SetRemote(n.Cluster.Remote())
	n.Cluster.Start()

	mln, err := c.Net.Listen(fmt.Sprintf("%s:%d", n.Host, mqttPort))
	if err != nil {
		return err
	}
	n.mqtt = listener.ServeTCP(mln, b, c.log, listener.Options{})
	n.mu.Lock()
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

// stop shuts the node down without a graceful leave: the others see it
// fail. Safe to call twice.
func (n *Node) stop() {
	n.mu.Lock()
	if !n.running {
		n.mu.Unlock()
		return
	}
	n.running = false
	n.mu.Unlock()
	_ = n.mqtt.Close()
	_ = n.Members.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.Broker.Close(ctx)
	_ = n.mqtt.Wait(ctx)
	_ = n.Cluster.Close()
	_ = n.mux.Close()
	if n.Store != nil {
		_ = n.Store.Close()
	}
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

// Heal undoes Partition(i, j).
func (c *Cluster) Heal(i, j int) { c.Net.Heal(hostOf(i), hostOf(j)) }

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
