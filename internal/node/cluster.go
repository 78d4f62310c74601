package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/meta"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// clusterParts are what a node runs to take part in a cluster: the listener
// mux on the cluster address, the metadata group, and membership. A node
// without a cluster address runs only the metadata group, on a private
// loopback listener, as a one-voter group of itself.
type clusterParts struct {
	mux        *mux
	pc         net.PacketConn
	meta       *meta.Meta
	membership *membership.Membership // nil when running alone
	peerLn     net.Listener           // node-to-node links ('P'); nil when alone
}

func (n *Node) startCluster(ctx context.Context) error {
	cfg := n.cfg
	timing, profile := meta.LAN, membership.LAN
	if cfg.ClusterTiming == "wan" {
		timing, profile = meta.WAN, membership.WAN
	}
	metaDir := filepath.Join(cfg.DataDir, "meta")
	cp := &clusterParts{}
	n.cluster = cp
	if cfg.ClusterAddr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("node: metadata listener: %w", err)
		}
		addr := ln.Addr().String()
		cp.meta, err = meta.Open(ctx, meta.Config{
			NodeID: cfg.NodeID, DataDir: metaDir, Addr: addr, Listener: ln, Dial: meta.DialTCP,
			Voter: true, Bootstrap: []meta.Server{{ID: cfg.NodeID, Addr: addr, Voter: true}},
			Timing: timing, Logger: n.log.With("subsystem", "meta"),
		})
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		n.registerSelf()
		return nil
	}

	ln, err := net.Listen("tcp", cfg.ClusterAddr)
	if err != nil {
		return fmt.Errorf("node: cluster listener: %w", err)
	}
	pc, err := net.ListenPacket("udp", cfg.ClusterAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("node: cluster listener (udp): %w", err)
	}
	cp.pc = pc
	cp.mux = newMux(ln)
	metaLn := cp.mux.route(true, 'R', 'F')
	gossipLn := cp.mux.route(false, protoGossip)
	cp.peerLn = cp.mux.route(false, protoPeer)
	cp.mux.serve()

	voter := cfg.Tier == membership.TierCore
	mc := meta.Config{
		NodeID: cfg.NodeID, DataDir: metaDir, Addr: cfg.ClusterAddr, Listener: metaLn, Dial: meta.DialTCP,
		Voter: voter, Timing: timing, Logger: n.log.With("subsystem", "meta"),
	}
	if len(cfg.Join) == 0 {
		mc.Bootstrap = []meta.Server{{ID: cfg.NodeID, Addr: cfg.ClusterAddr, Voter: true}}
	}
	if cp.meta, err = meta.Open(ctx, mc); err != nil {
		return fmt.Errorf("node: %w", err)
	}

	tr, err := membership.NewTransport(pc, gossipLn, membership.DialFunc(dialProto(protoGossip)), n.log.With("subsystem", "gossip"))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	cp.membership, err = membership.Start(ctx, membership.Config{
		NodeID: cfg.NodeID, Transport: tr, Join: cfg.Join, Profile: profile,
		Tags: membership.Labels{
			Site: cfg.Site, Zone: cfg.Zone, Tier: cfg.Tier,
			MQTTAddr: n.addrLocked("mqtt"), AdminAddr: n.addrLocked("admin"), PeerAddr: cfg.ClusterAddr,
		},
		Logger: n.log.With("subsystem", "membership"),
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if len(cfg.Join) > 0 {
		// Joining the metadata group needs its leader; do it in the
		// background so the node serves its clients meanwhile.
		go func() {
			jctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := cp.meta.Join(jctx, cfg.Join); err != nil && !errors.Is(err, meta.ErrClosed) {
				n.log.Error("joining the metadata group failed", "err", err)
				return
			}
			n.registerSelf()
		}()
	} else {
		n.registerSelf()
	}
	return nil
}

// registerSelf records this node in the metadata registry (in the
// background: it waits for a leader).
func (n *Node) registerSelf() {
	cp, cfg := n.cluster, n.cfg
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := cp.meta.Propose(ctx, fsm.RegisterNode(fsm.Node{
			ID: cfg.NodeID, JoinedAt: n.clock.Now(),
			Labels: fsm.Labels{
				Site: cfg.Site, Zone: cfg.Zone, Tier: cfg.Tier,
				MQTTAddr: n.Addr("mqtt"), AdminAddr: n.Addr("admin"), PeerAddr: cfg.ClusterAddr,
			},
		}))
		if err != nil && !errors.Is(err, meta.ErrClosed) && !errors.Is(err, context.Canceled) {
			n.log.Warn("registering the node in the metadata group failed", "err", err)
		}
	}()
}

func (n *Node) closeCluster() error {
	cp := n.cluster
	var errs []error
	if cp.membership != nil {
		// Leaving tells the others at once instead of letting them detect a
		// failure; it is best effort (the others may be gone already).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := cp.membership.Leave(ctx); err != nil {
			n.log.Warn("leaving the cluster gracefully failed", "err", err)
		}
		cancel()
		errs = append(errs, cp.membership.Shutdown())
	}
	if cp.meta != nil {
		errs = append(errs, cp.meta.Close())
	}
	if cp.mux != nil {
		cp.mux.close()
	}
	return errors.Join(errs...)
}
