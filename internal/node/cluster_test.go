package node_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/bench"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/node"
	"github.com/sextantmq/sextant/internal/tlstest"
)

// freeAddr returns a loopback address with a port free for TCP and UDP.
func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", brokertest.FreePort(t, true, "127.0.0.1"))
}

func clusterConfig(t *testing.T, id string, join ...string) config.Config {
	c := brokertest.Config(t)
	c.NodeID = id
	c.ClusterAddr = freeAddr(t)
	c.Join = join
	return c
}

// TestThreeNodeMetadata forms a three-voter metadata group through the
// nodes' cluster addresses, writes policy rules on one node, reads them on
// every node, and keeps writing after the first node stops.
func TestThreeNodeMetadata(t *testing.T) {
	n1 := brokertest.Start(t, clusterConfig(t, "n1"))
	n2 := brokertest.Start(t, clusterConfig(t, "n2", n1.Cfg.ClusterAddr))
	n3 := brokertest.Start(t, clusterConfig(t, "n3", n1.Cfg.ClusterAddr))
	nodes := []*brokertest.Node{n1, n2, n3}

	brokertest.Eventually(t, 30*time.Second, func() bool {
		for _, n := range nodes {
			alive := 0
			for _, m := range n.Nodes() {
				if m.State == "alive" {
					alive++
				}
			}
			if alive != 3 {
				return false
			}
		}
		ci := n1.Cluster(context.Background())
		voters := 0
		for _, s := range ci.Servers {
			if s.Voter {
				voters++
			}
		}
		return voters == 3
	}, "three alive members and three voters")

	rules := []fsm.Rule{{Match: "swarm/+/#", Mode: fsm.Sequenced, Replicas: 3, LatencyMS: 40}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps, err := n2.PutPolicies(ctx, rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		brokertest.Eventually(t, 10*time.Second, func() bool {
			p := n.Policies()
			return p.Version == ps.Version && len(p.Rules) == 1 && p.Rules[0].Match == "swarm/+/#"
		}, fmt.Sprintf("policies readable on n%d", i+1))
	}

	// The group survives the loss of one voter.
	n1.Stop()
	v := ps.Version
	ps, err = n3.PutPolicies(ctx, []fsm.Rule{{Match: "game/#", Mode: fsm.Direct}}, &v)
	if err != nil {
		t.Fatalf("write after losing a voter: %v", err)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool { return n2.Policies().Version == ps.Version }, "n2 caught up")

	// An invalid rule is refused with its field.
	if _, err := n2.PutPolicies(ctx, []fsm.Rule{{Match: "a/#/b", Mode: fsm.Direct}}, nil); err == nil {
		t.Fatal("invalid filter accepted")
	}
}

// TestBenchAcrossNodes runs the load generator with its publisher on one
// node and its subscriber on another: every QoS 1 message crosses the peer
// link, none is lost, duplicated or reordered.
func TestBenchAcrossNodes(t *testing.T) {
	n1 := brokertest.Start(t, clusterConfig(t, "b1"))
	n2 := brokertest.Start(t, clusterConfig(t, "b2", n1.Cfg.ClusterAddr))
	brokertest.Eventually(t, 30*time.Second, func() bool { return len(n1.Nodes()) == 2 && len(n2.Nodes()) == 2 }, "two members")
	cfg := bench.Config{
		Scenario: bench.P2P, URL: "mqtt://" + n1.MQTT(), SubURL: "mqtt://" + n2.MQTT(),
		QoS: 1, Count: 3000,
	}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != 3000 || res.Lost != 0 || res.Duplicated != 0 || res.Reordered != 0 {
		t.Fatalf("across nodes: received %d lost %d duplicated %d reordered %d", res.Received, res.Lost, res.Duplicated, res.Reordered)
	}
}

// TestClusterTLS links two nodes over mutual TLS (cluster-tls) and checks
// that messages cross; a node whose certificate comes from another CA
// cannot link, so nothing published on it reaches the others.
func TestClusterTLS(t *testing.T) {
	ca, rogue := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	secure := func(c config.Config, ca *tlstest.CA, name string) config.Config {
		leaf := ca.Server(name)
		c.ClusterTLS, c.TLSCert, c.TLSKey, c.TLSCA = true, leaf.CertFile, leaf.KeyFile, ca.CertFile
		return c
	}
	n1 := brokertest.Start(t, secure(clusterConfig(t, "t1"), ca, "t1"))
	n2 := brokertest.Start(t, secure(clusterConfig(t, "t2", n1.Cfg.ClusterAddr), ca, "t2"))
	n3 := brokertest.Start(t, secure(clusterConfig(t, "t3", n1.Cfg.ClusterAddr), rogue, "t3"))
	brokertest.Eventually(t, 30*time.Second, func() bool { return len(n1.Nodes()) == 3 }, "three members")

	run := func(pub, sub *brokertest.Node, d time.Duration) *bench.Result {
		cfg := bench.Config{Scenario: bench.P2P, URL: "mqtt://" + pub.MQTT(), SubURL: "mqtt://" + sub.MQTT(), QoS: 1, Count: 500}
		if err := cfg.Normalize(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		res, err := bench.Run(ctx, cfg)
		if err != nil {
			return nil
		}
		return res
	}
	if res := run(n1, n2, 40*time.Second); res == nil || res.Received != 500 || res.Lost != 0 {
		t.Fatalf("over mutual TLS: %+v", res)
	}
	// The warm-up never sees its probes cross, so the run fails.
	if res := run(n3, n2, 3*time.Second); res != nil && res.Received > 0 {
		t.Fatalf("a node with a certificate from another CA delivered %d messages through the cluster", res.Received)
	}
}

// TestClusterGossipKey: nodes started with the same cluster-key-file form a
// cluster over encrypted gossip (and route between them), and a key file
// that is not a key stops the node with a message naming it.
func TestClusterGossipKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name, key string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := keyFile("good", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	withKey := func(c config.Config, f string) config.Config { c.ClusterKey = f; return c }

	n1 := brokertest.Start(t, withKey(clusterConfig(t, "k1"), good))
	n2 := brokertest.Start(t, withKey(clusterConfig(t, "k2", n1.Cfg.ClusterAddr), good))
	brokertest.Eventually(t, 30*time.Second, func() bool { return len(n1.Nodes()) == 2 && len(n2.Nodes()) == 2 }, "two members")
	sub := n2.ConnectV5(&paho.Connect{ClientID: "ksub", CleanStart: true})
	sub.Sub("k/#", 1)
	pub := n1.ConnectV5(&paho.Connect{ClientID: "kpub", CleanStart: true})
	brokertest.Eventually(t, 30*time.Second, func() bool {
		pub.Pub("k/probe", 0, false, "probe")
		select {
		case m := <-sub.Msgs:
			return m.Topic == "k/probe"
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, "a message crosses the encrypted cluster")

	// A node with another key cannot join (membership's TestGossipKey); it
	// keeps retrying, as for a seed node not up yet. A key file that holds
	// no key stops the node at once, with a message naming the setting.
	for name, f := range map[string]string{
		"not base64":   keyFile("bad", "not base64!"),
		"wrong length": keyFile("short", base64.StdEncoding.EncodeToString([]byte("seven b"))),
	} {
		cfg := withKey(clusterConfig(t, "k3", n1.Cfg.ClusterAddr), f)
		n, err := node.New(cfg, node.Options{Version: "test"})
		if err == nil {
			if err = n.Start(); err == nil {
				_ = n.Shutdown(context.Background())
			}
		}
		if err == nil || !strings.Contains(err.Error(), "cluster-key-file") {
			t.Errorf("%s: start gave %v, want an error naming cluster-key-file", name, err)
		}
	}
	if n := len(n1.Nodes()); n != 2 {
		t.Fatalf("n1 sees %d members, want 2", n)
	}
}
