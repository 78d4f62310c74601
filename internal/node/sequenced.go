package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/cluster/sequenced"
	"github.com/sextantmq/sextant/internal/delivery"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/session"

	"github.com/sextantmq/sextant/internal/meta"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
)

// groupsDir is where placement groups keep their storage, under the data
// dir: one directory per group (replication.GroupID.DirName) with the Raft
// log (wal/), snapshots and the topic log (log/).
func (n *Node) groupsDir() string { return filepath.Join(n.cfg.DataDir, "groups") }

// replicationTimeouts maps the replication-timing setting.
func replicationTimeouts(timing string) replication.Timeouts {
	if timing == "wan" {
		return replication.WAN()
	}
	return replication.LAN()
}

// startGroups starts the replication engine on ln (the 'D' share of the
// cluster address; nil for a node running alone, which only opens groups
// with one replica) and the set of this node's group replicas, which
// follows the metadata group.
func (n *Node) startGroups(cp *clusterParts, ln net.Listener, peerTLS *tls.Config) error {
	cfg := n.cfg
	dir := n.groupsDir()
	if n.opts.Ephemeral {
		// An ephemeral node is a new member after a restart (its metadata
		// copy was in memory): groups it held are not its own any more.
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("node: clear groups dir: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("node: groups dir: %w", err)
	}
	if ln != nil {
		var err error
		cp.engine, err = replication.New(replication.Config{
			NodeID: cfg.NodeID, Addr: cfg.ClusterAddr, Listener: ln, Dial: n.net.Dial, TLS: peerTLS,
			DataDir: dir, Timeouts: replicationTimeouts(cfg.ReplicationTiming), Pipeline: cfg.ReplicationPipeline, MaxGroups: cfg.MaxGroups,
			Registerer: n.metrics.Registry, Logger: n.log.With("subsystem", "replication"),
		})
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	set, err := replicas.New(replicas.Config{
		NodeID: cfg.NodeID, Addr: cfg.ClusterAddr, Meta: cp.meta, Engine: cp.engine, Dir: dir,
		Sync: cfg.Fsync == "always", RetentionInterval: cfg.RetentionInterval, MaxGroups: cfg.MaxGroups,
		SegmentBytes: n.opts.GroupSegmentBytes, RecentBytes: recentBytes(cfg.GroupRecentBytes), Clock: n.clock, Registerer: n.metrics.Registry,
		Log: n.log.With("subsystem", "groups"),
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	cp.groups = set
	set.Start()
	return n.startPublishPath(cp)
}

// startPublishPath builds the sequenced publish path on the group replicas:
// the home side (answering the peers' MethodPublish, registered on the
// cluster layer before it starts) and the access node's router, which the
// broker hands the publishes of sequenced topics.
func (n *Node) startPublishPath(cp *clusterParts) error {
	cfg := n.cfg
	home := sequenced.NewHome(cp.groups, n.clock, n.metrics.Registry)
	rc := sequenced.Config{
		NodeID: cfg.NodeID, Meta: cp.meta, Home: home, MaxGroups: cfg.MaxGroups,
		Inflight: cfg.SequencedInflight, WaitTimeout: cfg.SlowConsumer,
		Retention: fsm.Retention{Messages: cfg.RetentionMessages, Duration: fsm.Duration(cfg.RetentionAge)},
		Clock:     n.clock, Registerer: n.metrics.Registry, Log: n.log.With("subsystem", "sequenced"),
	}
	if cp.layer != nil {
		if err := cp.layer.Handle(sequenced.MethodPublish, home.Serve); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		rc.Peers = cp.layer.Peers()
		rc.Cluster = clusterView{cp}
	}
	router, err := sequenced.New(rc)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	cp.router = router
	n.broker.SetSequencer(seqPublisher{router})
	if err := n.startMigrations(cp, home); err != nil {
		return err
	}
	return n.startFeeds(cp)
}

// startFeeds builds the delivery side: the server answering polls for the
// records of the groups replicated here, and the feeds that bring the
// records of the groups local subscribers want.
func (n *Node) startFeeds(cp *clusterParts) error {
	srv := delivery.NewServer(cp.groups, n.clock)
	dc := delivery.Config{
		NodeID: n.cfg.NodeID, Meta: cp.meta, Server: srv, Broker: n.broker,
		Clock: n.clock, Registerer: n.metrics.Registry, Log: n.log.With("subsystem", "delivery"),
	}
	if cp.layer != nil {
		if err := cp.layer.Handle(delivery.MethodPoll, srv.Serve); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		if err := cp.layer.Handle(delivery.MethodSeek, srv.ServeSeek); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		if err := cp.layer.Handle(delivery.MethodRange, srv.ServeRange); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		if err := cp.layer.Handle(methodGroupStats, n.serveGroupStats); err != nil { // groups.go
			return fmt.Errorf("node: %w", err)
		}
		if err := cp.layer.Handle(methodLinearRead, n.serveLinearRead); err != nil { // linearread.go
			return fmt.Errorf("node: %w", err)
		}
		if err := cp.layer.Handle(methodMetaApplied, n.serveMetaApplied); err != nil { // linearread.go
			return fmt.Errorf("node: %w", err)
		}
		dc.Peers = cp.layer.Peers()
	}
	feeds, err := delivery.New(dc)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	cp.feeds = feeds
	n.broker.SetLocalInterest(feeds)
	n.broker.SetReplays(feeds)
	feeds.Start()
	return nil
}

// clusterView is what the publish path knows of the other nodes: the
// cluster layer's alive members and membership's coordinates.
type clusterView struct{ cp *clusterParts }

func (v clusterView) Alive() []string { return v.cp.layer.Alive() }

func (v clusterView) EstimateRTT(a, b string) (time.Duration, bool) {
	return v.cp.membership.EstimateRTT(a, b)
}

// seqPublisher adapts the router to broker.Sequencer.
type seqPublisher struct{ r *sequenced.Router }

var (
	_ broker.Sequencer     = seqPublisher{}
	_ broker.InterestSince = (*delivery.Feeds)(nil)
)

func (p seqPublisher) Publish(clientID string, packetID uint16, m *message.Message, ack session.Acker) bool {
	var a sequenced.Acker
	if ack != nil {
		a = ack
	}
	return p.r.Publish(clientID, packetID, m, a)
}

// closeGroups closes the group replicas, then the engine.
func (cp *clusterParts) closeGroups() error {
	var errs []error
	if cp.receiver != nil {
		cp.receiver.Close()
	}
	if cp.groups != nil {
		errs = append(errs, cp.groups.Close())
	}
	if cp.engine != nil {
		if err := cp.engine.Close(); err != nil && !errors.Is(err, replication.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Groups exposes this node's placement-group replicas (nil before Start),
// for tests and the admin API.
func (n *Node) Groups() *replicas.Set {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.groups
}

// Meta exposes the node's metadata group (nil before Start), for tests.
func (n *Node) Meta() *meta.Meta {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.meta
}

// History reads sequenced topics' history (a topic's bounds, its messages
// by index) from a replica of its group: this node's, or the home's. It is
// nil before Start. The admin API's /v1/topics/{topic} and
// /v1/topics/{topic}/messages and `sextant log` are built on it.
func (n *Node) History() *delivery.History {
	if n.cluster == nil || n.cluster.feeds == nil {
		return nil
	}
	return n.cluster.feeds.History()
}

// recentBytes maps --group-recent-bytes onto the sequencer's option, where
// 0 means its default and a negative value none.
func recentBytes(n int64) int {
	if n == 0 {
		return -1
	}
	return int(n)
}
