package meta

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/netx"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("meta: invalid config")

// Server is one member of the group.
type Server struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// Timing selects Raft's timeouts; see the package comment.
type Timing int

const (
	LAN Timing = iota
	WAN
)

// Config configures Open.
type Config struct {
	// NodeID is this node's id in the group (the node id of the cluster).
	NodeID string
	// DataDir holds the log, stable store and snapshots.
	DataDir string
	// Addr is the address other members dial to reach Listener.
	Addr string
	// Listener accepts the group's connections; Meta owns it from Open on.
	Listener net.Listener
	// Dial opens connections to other members (netx.DialTCP in production).
	Dial netx.DialFunc
	// TLS secures the group's connections (nil: plain). After a
	// connection's kind byte, which stays in the clear for the listener's
	// multiplexer, the dialling side runs a client handshake and the
	// accepting side a server handshake with this config; every member
	// needs a certificate the others accept (peer.ClusterTLS's Config is
	// one, for mutual TLS against the cluster CA).
	TLS *tls.Config
	// Voter is the role Join asks for: voter (core node) or non-voter.
	Voter bool
	// Bootstrap lists the initial voters of a new cluster. A node listed
	// here that opens with empty storage bootstraps the group; every listed
	// node must be given the same list. Leave empty on nodes that join an
	// existing group.
	Bootstrap []Server
	// Timing selects Raft's timeouts.
	Timing Timing
	// SnapshotThreshold is the number of log entries between snapshots
	// (default 1024); TrailingLogs the entries kept after one (default 1024).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// InMemory keeps the log, stable store and snapshots in memory instead
	// of DataDir: nothing survives Close, and a reopened member is a new,
	// empty one. For nodes that keep nothing durable (node.Options
	// Ephemeral: in-process test clusters and benchmarks).
	InMemory bool
	// Logger receives Raft's logs (default: discarded).
	Logger *slog.Logger
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return fmt.Errorf("%w: empty node id", ErrConfig)
	case c.DataDir == "" && !c.InMemory:
		return fmt.Errorf("%w: empty data dir", ErrConfig)
	case c.Addr == "":
		return fmt.Errorf("%w: empty address", ErrConfig)
	case c.Listener == nil:
		return fmt.Errorf("%w: no listener", ErrConfig)
	case c.Dial == nil:
		return fmt.Errorf("%w: no dial function", ErrConfig)
	case c.Timing != LAN && c.Timing != WAN:
		return fmt.Errorf("%w: unknown timing %d", ErrConfig, c.Timing)
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, s := range c.Bootstrap {
		if s.ID == "" || s.Addr == "" {
			return fmt.Errorf("%w: bootstrap server %+v lacks an id or address", ErrConfig, s)
		}
		if ids[s.ID] || addrs[s.Addr] {
			return fmt.Errorf("%w: bootstrap server %+v listed twice", ErrConfig, s)
		}
		ids[s.ID], addrs[s.Addr] = true, true
		if s.ID == c.NodeID && s.Addr != c.Addr {
			return fmt.Errorf("%w: bootstrap lists %s at %s but its address is %s", ErrConfig, s.ID, s.Addr, c.Addr)
		}
	}
	if n := len(c.Bootstrap); n > 0 && n%2 == 0 {
		return fmt.Errorf("%w: %d bootstrap voters; use an odd number (1, 3 or 5)", ErrConfig, n)
	}
	return nil
}

// bootstraps reports whether this node is one of the initial voters.
func (c Config) bootstraps() bool {
	for _, s := range c.Bootstrap {
		if s.ID == c.NodeID {
			return true
		}
	}
	return false
}

func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	switch c.Timing {
	case WAN:
		rc.HeartbeatTimeout = 2500 * time.Millisecond
		rc.ElectionTimeout = 2500 * time.Millisecond
		rc.LeaderLeaseTimeout = 1500 * time.Millisecond
		rc.CommitTimeout = 50 * time.Millisecond
	default:
		rc.HeartbeatTimeout = 500 * time.Millisecond
		rc.ElectionTimeout = 500 * time.Millisecond
		rc.LeaderLeaseTimeout = 250 * time.Millisecond
		rc.CommitTimeout = 20 * time.Millisecond
	}
	rc.SnapshotThreshold = 1024
	if c.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	rc.TrailingLogs = 1024
	if c.TrailingLogs > 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
	return rc
}
