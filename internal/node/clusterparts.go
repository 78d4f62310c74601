package node

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/cluster/sequenced"
	"github.com/sextantmq/sextant/internal/delivery"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/meta"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/migration"
	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
)

// protoGossip opens gossip streams on the cluster address; the metadata
// group writes 'R'/'F' and peer links peer.Kind themselves.
const protoGossip = 'G'

// Timeouts of the node's cluster work.
const (
	// metaJoinTimeout bounds joining the metadata group, which needs its
	// leader; the node serves its clients meanwhile.
	metaJoinTimeout = 2 * time.Minute
	// registerTimeout bounds one attempt at recording this node in the
	// metadata registry; a failed attempt is retried after registerBackoff,
	// doubling up to registerBackoffMax, until the node is registered.
	registerTimeout    = time.Minute
	registerBackoff    = 500 * time.Millisecond
	registerBackoffMax = 10 * time.Second
	// leaveTimeout bounds telling the other nodes this one leaves, at
	// shutdown (they may be gone already).
	leaveTimeout = 2 * time.Second
)

// clusterParts are what a node runs to take part in a cluster: the listener
// mux on the cluster address, the metadata group, membership, and the
// cluster layer (peer links, interest routing, retained replication,
// session directory). A node without a cluster address runs only the
// metadata group, on a private loopback listener, as a one-voter group of
// itself.
type clusterParts struct {
	mux        *peer.Mux
	meta       *meta.Meta
	membership *membership.Membership // nil when running alone
	layer      *cluster.Layer         // nil when running alone
	tls        *peer.ClusterTLS       // nil without cluster-tls; reloaded on SIGHUP
	engine     *replication.Engine    // replicated placement groups; nil when running alone
	groups     *replicas.Set          // this node's placement-group replicas (sequenced.go)
	router     *sequenced.Router      // the access node's sequenced publish path
	feeds      *delivery.Feeds        // sequenced records to local subscribers
	migrations *migration.Driver      // moves groups this node is home of (migration.go)
	receiver   *migration.Receiver    // takes groups handed over to this node
	placement  *placementParts        // live placement (placement.go)
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
	metaLog := n.log.With("subsystem", "meta")
	self := fsm.Labels{Site: cfg.Site, Zone: cfg.Zone, Tier: cfg.Tier,
		MQTTAddr: n.addrLocked("mqtt"), AdminAddr: n.addrLocked("admin"), PeerAddr: cfg.ClusterAddr}
	if cfg.ClusterAddr == "" {
		ln, err := n.net.Listen("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("node: metadata listener: %w", err)
		}
		addr := ln.Addr().String()
		cp.meta, err = meta.Open(ctx, meta.Config{
			NodeID: cfg.NodeID, DataDir: metaDir, Addr: addr, Listener: ln, Dial: n.net.Dial, InMemory: n.opts.Ephemeral,
			Voter: true, Bootstrap: []meta.Server{{ID: cfg.NodeID, Addr: addr, Voter: true}},
			Timing: timing, Logger: metaLog,
		})
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		n.registerSelf(self)
		if err := n.startGroups(cp, nil, nil); err != nil {
			return err
		}
		return n.startPlacement(cp)
	}

	var peerTLS *tls.Config
	if cfg.ClusterTLS {
		var err error
		if cp.tls, err = peer.LoadTLS(cfg.TLSCA, cfg.TLSCert, cfg.TLSKey); err != nil {
			return fmt.Errorf("node: cluster-tls: %w", err)
		}
		peerTLS = cp.tls.Config()
	}
	gossipKey, err := loadClusterKey(cfg.ClusterKey)
	if err != nil {
		return err
	}

	ln, err := n.net.Listen(cfg.ClusterAddr)
	if err != nil {
		return fmt.Errorf("node: cluster listener: %w", err)
	}
	pc, err := n.net.ListenPacket(cfg.ClusterAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("node: cluster listener (udp): %w", err)
	}
	cp.mux = peer.NewMux(ln, 0, n.log.With("subsystem", "mux"))
	metaLn := cp.mux.Listener('R', 'F')
	gossipLn := skipFirstByte{cp.mux.Listener(protoGossip)}
	peerLn := cp.mux.Listener(peer.Kind)
	groupLn := cp.mux.Listener(replication.Kind)
	cp.mux.Start()

	voter := cfg.Tier == membership.TierCore
	mc := meta.Config{
		NodeID: cfg.NodeID, DataDir: metaDir, Addr: cfg.ClusterAddr, Listener: metaLn, Dial: n.net.Dial, InMemory: n.opts.Ephemeral,
		TLS: peerTLS, Voter: voter, Timing: timing, Logger: metaLog,
	}
	if len(cfg.Join) == 0 {
		mc.Bootstrap = []meta.Server{{ID: cfg.NodeID, Addr: cfg.ClusterAddr, Voter: true}}
	}
	if cp.meta, err = meta.Open(ctx, mc); err != nil {
		pc.Close()
		return fmt.Errorf("node: %w", err)
	}

	// A node that remembers other members from an earlier run rejoins
	// them in the background, whatever its flags; a new node joins through
	// its join list before it serves.
	knownPath := n.knownPath()
	remembered := n.remembered(cp, knownPath)
	join := cfg.Join
	if len(remembered) > 0 {
		join = nil
	}
	n.peering.expected = len(cfg.Join) > 0 || len(remembered) > 0
	tr, err := membership.NewTransport(pc, gossipLn, n.dialProto(protoGossip), n.log.With("subsystem", "gossip"))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	cp.membership, err = membership.Start(ctx, membership.Config{
		NodeID: cfg.NodeID, Transport: tr, Join: join, Profile: profile, SecretKey: gossipKey, KnownFile: knownPath,
		Tags: membership.Labels{
			Site: cfg.Site, Zone: cfg.Zone, Tier: cfg.Tier,
			MQTTAddr: self.MQTTAddr, AdminAddr: self.AdminAddr, PeerAddr: cfg.ClusterAddr,
		},
		Logger: n.log.With("subsystem", "membership"),
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if len(join) > 0 {
		n.peering.joined.Store(true) // Start returned once one answered
	}
	seed := n.opts.Seed
	if seed == 0 {
		seed = uint64(n.clock.Now().UnixNano())
	}
	lcfg := cluster.Config{
		NodeID: cfg.NodeID, Deliver: n.broker, Relays: n.broker, Retained: n.broker, Sessions: n.broker,
		Members: cp.membership, Estimate: cp.membership.EstimateRTT, Listener: peerLn, TLS: peerTLS,
		Dial: n.net.Dial, Registerer: n.metrics.Registry, Clock: n.clock,
		Log: n.log.With("subsystem", "cluster"), Seed: seed,
	}
	if n.opts.Cluster != nil {
		n.opts.Cluster(&lcfg)
	}
	cp.layer, err = cluster.New(lcfg)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := n.startGroups(cp, groupLn, peerTLS); err != nil {
		return err
	}
	if err := n.startPlacement(cp); err != nil {
		return err
	}
	n.broker.SetRemote(cp.layer.Remote())
	cp.layer.Start()
	joinVia := without(union(slices.Clone(cfg.Join), remembered), cfg.ClusterAddr)
	if len(remembered) > 0 {
		n.rejoinGossip(cp, joinVia)
	}
	n.healGossip(cp, remembered)

	if len(cfg.Join) > 0 {
		// Joining the metadata group needs its leader; do it in the
		// background so the node serves its clients meanwhile.
		n.group.Go(func(ctx context.Context) {
			jctx, cancel := context.WithTimeout(ctx, metaJoinTimeout)
			defer cancel()
			if err := cp.meta.Join(jctx, joinVia); err != nil {
				if !errors.Is(err, meta.ErrClosed) && ctx.Err() == nil {
					n.log.Error("joining the metadata group failed", "err", err)
				}
				return
			}
			n.registerSelf(self)
		})
	} else {
		n.registerSelf(self)
	}
	return nil
}

// loadClusterKey reads the gossip key file (none: nil): base64 of 16, 24 or
// 32 bytes.
func loadClusterKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("node: cluster-key-file: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("node: cluster-key-file %s: not base64: %w", path, err)
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("node: cluster-key-file %s: a key of %d bytes; want 16, 24 or 32", path, n)
	}
	return key, nil
}

// registerSelf records this node in the metadata registry, in the
// background, retrying until it is recorded or the node stops. A node that
// is not registered hosts no placement group and creates none (its first
// publish to a new group waits), so one failed attempt (a leader change
// while it committed, say) must not leave it out for good. Registering is
// idempotent: a retry of an attempt whose outcome was unknown only
// records the same node again.
func (n *Node) registerSelf(labels fsm.Labels) {
	cp, cfg := n.cluster, n.cfg
	n.group.Go(func(ctx context.Context) {
		backoff := registerBackoff
		for {
			actx, cancel := context.WithTimeout(ctx, registerTimeout)
			_, err := cp.meta.Propose(actx, fsm.RegisterNode(fsm.Node{ID: cfg.NodeID, JoinedAt: n.clock.Now(), Labels: labels}))
			cancel()
			if err == nil || errors.Is(err, meta.ErrClosed) || ctx.Err() != nil {
				return
			}
			n.log.Warn("registering the node in the metadata group failed; retrying", "err", err, "retry_in", backoff)
			t := n.clock.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			backoff = min(2*backoff, registerBackoffMax)
		}
	})
}

// leaveCluster tells the other nodes this one is going (best effort: they
// may be gone already), so they stop routing to it before it stops serving.
func (n *Node) leaveCluster(ctx context.Context) {
	if cp := n.cluster; cp != nil && cp.membership != nil {
		ctx, cancel := context.WithTimeout(ctx, leaveTimeout)
		if err := cp.membership.Leave(ctx); err != nil {
			n.log.Warn("leaving the cluster gracefully failed", "err", err)
		}
		cancel()
	}
}

// closeCluster stops the cluster parts; the broker must be closed already.
func (n *Node) closeCluster() error {
	cp := n.cluster
	var errs []error
	if cp.router != nil {
		cp.router.Close()
	}
	if cp.feeds != nil {
		cp.feeds.Close()
	}
	if cp.layer != nil {
		errs = append(errs, cp.layer.Close())
	}
	errs = append(errs, cp.closeGroups())
	if cp.membership != nil {
		errs = append(errs, cp.membership.Shutdown())
	}
	if cp.meta != nil {
		errs = append(errs, cp.meta.Close())
	}
	if cp.mux != nil {
		errs = append(errs, cp.mux.Close())
	}
	return errors.Join(errs...)
}

// skipFirstByte drops the protocol byte the mux leaves unread, for a
// subsystem (gossip) whose streams do not expect it.
type skipFirstByte struct{ net.Listener }

func (l skipFirstByte) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &skipConn{Conn: c}, nil
}

type skipConn struct {
	net.Conn
	skipped bool
}

func (c *skipConn) Read(p []byte) (int, error) {
	if !c.skipped {
		var b [1]byte
		if _, err := io.ReadFull(c.Conn, b[:]); err != nil {
			return 0, err
		}
		c.skipped = true
	}
	return c.Conn.Read(p)
}

// dialProto dials addr on the node's network and sends the protocol byte.
func (n *Node) dialProto(proto byte) netx.DialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := n.net.Dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		if _, err := c.Write([]byte{proto}); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}
