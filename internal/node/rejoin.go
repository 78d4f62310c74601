package node

import (
	"context"
	"errors"
	"time"
)

// rejoinReadTimeout bounds reading the metadata group's members to rejoin.
const rejoinReadTimeout = 5 * time.Second

// rejoinGossip lets a node that was restarted without a join list (the node
// that bootstrapped the cluster, typically) find the cluster again: the
// other nodes saw it leave gracefully and will not call it back, so it
// joins gossip through the cluster addresses of the metadata group's other
// members, which its data directory remembers. It runs in the background,
// retrying until one answers or the node shuts down, so that a node whose
// peers are all down still starts and serves its clients.
func (n *Node) rejoinGossip(cp *clusterParts) {
	if len(n.cfg.Join) > 0 || cp.membership == nil || cp.meta == nil {
		return
	}
	ctx, cancel := context.WithTimeout(n.group.Context(), rejoinReadTimeout)
	servers, err := cp.meta.Servers(ctx)
	cancel()
	if err != nil {
		n.log.Warn("reading the metadata group's members to rejoin the cluster failed", "err", err)
		return
	}
	var addrs []string
	for _, s := range servers {
		if s.ID != n.cfg.NodeID && s.Addr != "" {
			addrs = append(addrs, s.Addr)
		}
	}
	if len(addrs) == 0 {
		return // a new cluster, or a cluster of one
	}
	n.log.Info("rejoining the cluster through the metadata group's members", "addrs", addrs)
	n.group.Go(func(ctx context.Context) { // until it succeeds or the node shuts down
		if err := cp.membership.Join(ctx, addrs); err != nil && !errors.Is(err, context.Canceled) {
			n.log.Warn("rejoining the cluster failed", "err", err)
		}
	})
}
