package replication

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/netx"
)

// DialFunc opens a stream to a node's cluster address (netx.DialTCP in
// production).
type DialFunc = netx.DialFunc

// Timeouts are a group's Raft timing. Followers stand for election after
// Heartbeat without hearing from the leader (the library checks at random
// points between Heartbeat and twice it, and the leader sends heartbeats
// every Heartbeat/10 to Heartbeat/5); a candidate waits Election for votes; a
// leader that has not heard from a majority for LeaderLease steps down; a
// leader with nothing to send still sends its commit index every Commit to
// 2 x Commit, so followers apply what was committed. The zero value means
// LAN(). See docs/design/replication.md for the measured trade-off between
// failover time and idle cost.
type Timeouts struct {
	Heartbeat   time.Duration `json:"heartbeat" yaml:"heartbeat"`
	Election    time.Duration `json:"election" yaml:"election"`
	LeaderLease time.Duration `json:"leader_lease" yaml:"leader_lease"`
	Commit      time.Duration `json:"commit" yaml:"commit"`
}

// LAN is the default: replicas in one site (RTT about 1 ms or less). A dead
// leader is replaced in about 0.3 s (median over 20 kills; see
// docs/design/replication.md), well inside Canal's 667 ms. The lease is as
// long as the library allows (the heartbeat timeout), so that a leader on a
// starved machine does not step down for a late heartbeat answer.
func LAN() Timeouts {
	return Timeouts{Heartbeat: 150 * time.Millisecond, Election: 150 * time.Millisecond,
		LeaderLease: 150 * time.Millisecond, Commit: 100 * time.Millisecond}
}

// WAN is for replicas in different regions: inter-city RTTs reach about
// 300 ms, so a heartbeat round trip plus a lost packet or two must fit well
// inside Heartbeat. Failover then takes a few seconds.
func WAN() Timeouts {
	return Timeouts{Heartbeat: 2 * time.Second, Election: 2 * time.Second,
		LeaderLease: time.Second, Commit: 200 * time.Millisecond}
}

// orDefault maps the zero value to LAN().
func (t Timeouts) orDefault() Timeouts {
	if t == (Timeouts{}) {
		return LAN()
	}
	return t
}

// Validate checks the timeouts against each other; the zero value is valid
// (LAN).
func (t Timeouts) Validate() error {
	t = t.orDefault()
	switch {
	case t.Heartbeat < 10*time.Millisecond:
		return fmt.Errorf("%w: heartbeat timeout %v is below 10ms", ErrConfig, t.Heartbeat)
	case t.Election < t.Heartbeat:
		return fmt.Errorf("%w: election timeout %v is below the heartbeat timeout %v", ErrConfig, t.Election, t.Heartbeat)
	case t.LeaderLease < 5*time.Millisecond || t.LeaderLease > t.Heartbeat:
		return fmt.Errorf("%w: leader lease %v must be between 5ms and the heartbeat timeout %v", ErrConfig, t.LeaderLease, t.Heartbeat)
	case t.Commit < time.Millisecond || t.Commit > t.Heartbeat:
		return fmt.Errorf("%w: commit timeout %v must be between 1ms and the heartbeat timeout %v", ErrConfig, t.Commit, t.Heartbeat)
	}
	return nil
}

// Config configures an Engine. Zero numeric fields take the default named
// in their comment.
type Config struct {
	// NodeID is this node's id; it names the node in every group.
	NodeID string
	// Addr is the cluster address other nodes dial to reach Listener.
	Addr string
	// Listener yields the connections whose first byte is Kind (from the
	// node's first-byte multiplexer; the byte still unread). The Engine
	// owns it from New on.
	Listener net.Listener
	// Dial opens connections to other nodes' cluster addresses (netx.DialTCP in
	// production).
	Dial DialFunc
	// TLS secures every group connection after its kind byte (nil:
	// plain): the dialling side runs a client handshake, the accepting
	// side a server handshake, with this one config (the node's
	// cluster-tls config, the same one the metadata group and the peer
	// links use).
	TLS *tls.Config
	// DataDir holds one directory per group.
	DataDir string
	// Timeouts is the Raft timing of every group (zero: LAN()).
	Timeouts Timeouts
	// MaxGroups bounds the groups open on this node (default 256): each
	// costs goroutines, connections and heartbeats whether or not it is
	// used.
	MaxGroups int
	// MaxBatch is the most entries one log write, one replication message
	// and one state-machine batch carry (default 256, at most 1024).
	MaxBatch int
	// Pipeline is the most AppendEntries a leader keeps in flight to each
	// follower (default 4; 1: one at a time, the next waiting for the
	// previous answer). With more, a follower receives the next batch
	// while it stores the previous one.
	Pipeline int
	// QueueDepth bounds the proposals waiting to enter Raft per group
	// (default 1024); Submit blocks (until its context ends) while it is
	// full.
	QueueDepth int
	// SnapshotThreshold is the number of log entries between snapshots
	// (default 8192); TrailingLogs the entries kept after one (default
	// 4096), so a briefly absent follower catches up from the log.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SegmentBytes is the size of a group's log segment files (default
	// 4 MiB). Segments are preallocated, so this is also the disk an idle
	// group takes.
	SegmentBytes int
	// Registerer receives the engine's metrics (nil: not exported).
	Registerer prometheus.Registerer
	// Logger receives the engine's and Raft's logs (nil: discarded).
	// Raft's routine chatter arrives at debug level.
	Logger *slog.Logger
}

// Defaults.
const (
	defaultMaxGroups         = 256
	defaultMaxBatch          = 256
	maxMaxBatch              = 1024
	defaultQueueDepth        = 1024
	defaultPipeline          = 4
	maxPipeline              = 64
	defaultSnapshotThreshold = 8192
	defaultTrailingLogs      = 4096
	defaultSegmentBytes      = 4 << 20
	maxIDLen                 = 255
)

func (c Config) withDefaults() Config {
	c.Timeouts = c.Timeouts.orDefault()
	if c.MaxGroups == 0 {
		c.MaxGroups = defaultMaxGroups
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = defaultMaxBatch
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = defaultQueueDepth
	}
	if c.Pipeline == 0 {
		c.Pipeline = defaultPipeline
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = defaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = defaultTrailingLogs
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = defaultSegmentBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks the config.
func (c Config) Validate() error {
	if err := validNodeID(c.NodeID); err != nil {
		return err
	}
	switch {
	case c.Addr == "":
		return fmt.Errorf("%w: empty cluster address", ErrConfig)
	case strings.Contains(c.Addr, "@"):
		return fmt.Errorf("%w: cluster address %q contains '@'", ErrConfig, c.Addr)
	case c.Listener == nil:
		return fmt.Errorf("%w: no listener", ErrConfig)
	case c.Dial == nil:
		return fmt.Errorf("%w: no dial function", ErrConfig)
	case c.DataDir == "":
		return fmt.Errorf("%w: empty data dir", ErrConfig)
	case c.MaxGroups < 0:
		return fmt.Errorf("%w: negative group budget %d", ErrConfig, c.MaxGroups)
	case c.MaxBatch < 0 || c.MaxBatch > maxMaxBatch:
		return fmt.Errorf("%w: batch size %d is outside 1..%d", ErrConfig, c.MaxBatch, maxMaxBatch)
	case c.Pipeline < 0 || c.Pipeline > maxPipeline:
		return fmt.Errorf("%w: pipeline depth %d is outside 1..%d", ErrConfig, c.Pipeline, maxPipeline)
	case c.QueueDepth < 0:
		return fmt.Errorf("%w: negative queue depth %d", ErrConfig, c.QueueDepth)
	case c.SegmentBytes < 0 || c.SegmentBytes > 0 && c.SegmentBytes < 64<<10:
		return fmt.Errorf("%w: segment size %d is below 64 KiB", ErrConfig, c.SegmentBytes)
	}
	return c.Timeouts.Validate()
}

// validNodeID checks a node id: it travels in connection headers (one
// length byte) and in Raft addresses ("id@addr").
func validNodeID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%w: node id %q must have 1 to %d bytes", ErrConfig, id, maxIDLen)
	}
	return nil
}

// GroupID names a replicated placement group; it is the same on every
// replica.
type GroupID string

// Validate checks that id fits a connection header (1 to 255 bytes, no
// control characters).
func (id GroupID) Validate() error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%w: group id %q must have 1 to %d bytes", ErrConfig, string(id), maxIDLen)
	}
	for _, r := range string(id) {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: group id %q has a control character", ErrConfig, string(id))
		}
	}
	return nil
}

// DirName is id as a directory name: letters, digits, '-' and '_' stay,
// every other byte (including '/' and '.') becomes %XX, so an id can never
// name a path outside DataDir.
func (id GroupID) DirName() string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
