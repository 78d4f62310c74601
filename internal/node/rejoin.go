package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/run"
)

// rejoinReadTimeout bounds reading the metadata group's members to rejoin.
const rejoinReadTimeout = 5 * time.Second

// knownMembersFile is the file in the data directory where membership
// remembers the other members it has seen.
const knownMembersFile = "members.json"

// peering is what a node knows of its place in a cluster at start, for
// its readiness: whether it expects other nodes (it was told to join, or
// remembers members from an earlier run) and whether one has answered.
type peering struct {
	expected bool
	joined   atomic.Bool
}

// remembered returns the cluster addresses a node restarted on this data
// directory can rejoin through: the members its membership remembered (in
// knownMembersFile) and the metadata group's other members (in its
// configuration), without this node's own. A new node has none.
func (n *Node) remembered(cp *clusterParts, knownPath string) []string {
	var addrs []string
	if knownPath != "" {
		ms, err := membership.LoadKnown(knownPath)
		if err != nil {
			n.log.Warn("reading the remembered cluster members failed", "err", err)
		}
		for _, m := range ms {
			if m.ID != n.cfg.NodeID {
				addrs = append(addrs, m.Addr)
			}
		}
	}
	ctx, cancel := context.WithTimeout(n.group.Context(), rejoinReadTimeout)
	servers, err := cp.meta.Servers(ctx)
	cancel()
	if err != nil {
		n.log.Warn("reading the metadata group's members to rejoin the cluster failed", "err", err)
	}
	for _, s := range servers {
		if s.ID != n.cfg.NodeID && s.Addr != "" {
			addrs = append(addrs, s.Addr)
		}
	}
	return without(union(nil, addrs), n.cfg.ClusterAddr)
}

// knownPath is where membership remembers members (none when the node
// keeps nothing durable).
func (n *Node) knownPath() string {
	if n.opts.Ephemeral {
		return ""
	}
	return filepath.Join(n.cfg.DataDir, knownMembersFile)
}

// rejoinGossip lets a restarted node find the cluster again, whatever its
// flags: the other nodes may have seen it leave gracefully (and will not
// call it back), or its join list may name nodes that are gone. It joins
// gossip through addrs (its join list and the members it remembers) in
// the background, retrying until one answers or the node shuts down, so
// that it serves its clients meanwhile (and says it is not ready: see
// clusterReady).
func (n *Node) rejoinGossip(cp *clusterParts, addrs []string) {
	n.log.Info("rejoining the cluster through the members this node knew", "addrs", addrs)
	n.group.Go(func(ctx context.Context) { // until it succeeds or the node shuts down
		if err := cp.membership.Join(ctx, addrs); err != nil {
			if !errors.Is(err, context.Canceled) {
				n.log.Warn("rejoining the cluster failed", "err", err)
			}
			return
		}
		n.peering.joined.Store(true)
		n.log.Info("rejoined the cluster")
	})
}

// healInterval is how often a node checks that gossip knows every node it
// should (healGossip).
const healInterval = 10 * time.Second

// healGossip makes sure gossip has not formed in parts: a node's join list
// may answer only in part (a node listed there was starting, or down), and
// gossip then holds two groups that never hear of each other. Every
// healInterval, the node contacts the addresses it knows of (its join
// list, the members it remembered at start, the metadata group's members)
// that gossip does not list at all, once each time; a member gossip lists,
// even as failed, is left to gossip's own reconnection.
func (n *Node) healGossip(cp *clusterParts, known []string) {
	n.group.Go(func(ctx context.Context) {
		run.Every(ctx, n.clock, healInterval, healInterval, func(ctx context.Context) {
			addrs := union(slices.Clone(n.cfg.Join), known)
			rctx, cancel := context.WithTimeout(ctx, rejoinReadTimeout)
			servers, _ := cp.meta.Servers(rctx)
			cancel()
			for _, s := range servers {
				addrs = union(addrs, []string{s.Addr})
			}
			listed := map[string]bool{n.cfg.ClusterAddr: true}
			for _, m := range cp.membership.Members() {
				listed[m.Addr] = true
			}
			addrs = slices.DeleteFunc(addrs, func(a string) bool { return a == "" || listed[a] })
			if len(addrs) == 0 {
				return
			}
			if k, _ := cp.membership.TryJoin(addrs); k > 0 {
				n.log.Info("joined nodes gossip did not know of", "addrs", addrs, "answered", k)
			}
		})
	})
}

// clusterReady says why a clustered node is not ready to serve clients:
// it is cut off from the rest of the cluster, so that messages between its
// clients and the others' would not flow. That is the case while a node
// that expects other members has not reached any yet (a restart, before
// the rejoin answers), and while gossip sees other nodes alive but no peer
// link to any of them is up. A node whose peers all failed is ready: it is
// what is left of the cluster.
func (n *Node) clusterReady() error {
	cp := n.cluster
	if cp == nil || cp.membership == nil || cp.layer == nil {
		return nil
	}
	var alive []string
	for _, m := range cp.membership.Members() {
		if m.ID != n.cfg.NodeID && m.State == membership.StateAlive && m.Labels.PeerAddr != "" {
			alive = append(alive, m.ID)
		}
	}
	if len(alive) == 0 {
		if n.peering.expected && !n.peering.joined.Load() {
			return errors.New("cut off: rejoining the cluster, no other node has answered yet")
		}
		return nil
	}
	for _, id := range alive {
		if l := cp.layer.Peers().Link(id); l != nil && l.Up() {
			return nil
		}
	}
	return fmt.Errorf("cut off: no link to any of the %d other nodes yet", len(alive))
}

// union appends to a the elements of b it lacks, in order.
func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

func without(a []string, s string) []string {
	return slices.DeleteFunc(a, func(x string) bool { return x == s })
}
