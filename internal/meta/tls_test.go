package meta

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/tlstest"
)

// TestGroupOverMutualTLS: with TLS set, a three-voter group elects a leader
// and commits writes forwarded from followers over TLS, and a node whose
// certificate comes from another CA cannot join.
func TestGroupOverMutualTLS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca, rogue := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
		c := newCluster(t, 2*time.Millisecond)
		c.tune = func(cfg *Config) {
			issuer := ca
			if cfg.NodeID == "n4" {
				issuer = rogue
			}
			leaf := issuer.Client(cfg.NodeID, tlstest.Options{})
			cfg.TLS = peer.TLSConfig(issuer.Pool(), leaf.Pair)
		}
		for _, id := range []string{"n1", "n2", "n3"} {
			c.open(id, true, voters("n1", "n2", "n3"))
		}
		lead := c.leader()
		var follower *Meta
		for _, m := range c.nodes {
			if m != lead {
				follower = m
			}
		}
		res, err := follower.Propose(ctxFor(t, 10*time.Second), registerCmd("a"))
		if err != nil {
			t.Fatalf("a write forwarded over TLS: %v", err)
		}
		for _, m := range c.nodes {
			if err := m.Wait(ctxFor(t, 5*time.Second), res.Index); err != nil {
				t.Fatal(err)
			}
		}

		intruder := c.open("n4", false, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := intruder.Join(ctx, []string{addr("n1"), addr("n2")}); err == nil {
			t.Fatal("a node with a certificate from another CA joined the group")
		}
		if _, ok := lead.State().Node("n4"); ok {
			t.Fatal("the intruder is registered")
		}
		servers, err := lead.Servers(ctxFor(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			if s.ID == "n4" {
				t.Fatalf("the intruder is a group member: %+v", servers)
			}
		}
	})
}
