package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/sextantmq/sextant/internal/logging"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("membership: invalid config")

// Tier says whether a node is an edge node or a core node (core nodes vote in
// the metadata group).
const (
	TierEdge = "edge"
	TierCore = "core"
)

// Labels are what a node announces about itself. They travel as Serf tags
// and are visible to every member.
type Labels struct {
	Site      string // edge site or datacentre
	Zone      string // failure domain inside the site
	Tier      string // TierEdge or TierCore
	MQTTAddr  string // client listener, host:port
	AdminAddr string // admin HTTP, host:port
	PeerAddr  string // node-to-node links and the metadata group, host:port
}

// Tag keys of Labels.
const (
	tagSite  = "site"
	tagZone  = "zone"
	tagTier  = "tier"
	tagMQTT  = "mqtt"
	tagAdmin = "admin"
	tagPeer  = "peer"
)

func (l Labels) tags() map[string]string {
	t := map[string]string{tagTier: l.Tier}
	for k, v := range map[string]string{tagSite: l.Site, tagZone: l.Zone, tagMQTT: l.MQTTAddr, tagAdmin: l.AdminAddr, tagPeer: l.PeerAddr} {
		if v != "" {
			t[k] = v
		}
	}
	return t
}

func labelsOf(tags map[string]string) Labels {
	return Labels{
		Site: tags[tagSite], Zone: tags[tagZone], Tier: tags[tagTier],
		MQTTAddr: tags[tagMQTT], AdminAddr: tags[tagAdmin], PeerAddr: tags[tagPeer],
	}
}

// Validate checks the tier and that the labels fit in a gossip message.
func (l Labels) Validate() error {
	if l.Tier != TierEdge && l.Tier != TierCore {
		return fmt.Errorf("%w: tier %q is neither %q nor %q", ErrConfig, l.Tier, TierEdge, TierCore)
	}
	size := 0
	for k, v := range l.tags() {
		size += len(k) + len(v) + 4
	}
	if size > memberlist.MetaMaxSize-16 {
		return fmt.Errorf("%w: labels take %d bytes, more than gossip metadata allows", ErrConfig, size)
	}
	return nil
}

// Profile selects gossip timing.
type Profile int

const (
	// LAN: memberlist's LAN defaults: probe every 1 s with a 500 ms ack
	// timeout, gossip every 200 ms, full state sync every 30 s. A failed
	// node is declared dead a few seconds after it stops answering. Use it
	// when every RTT between nodes is well under 500 ms' worth of margin,
	// e.g. one region.
	LAN Profile = iota
	// WAN: memberlist's WAN defaults: probe every 5 s with a 3 s ack
	// timeout, gossip every 500 ms to 4 nodes, state sync every 60 s and a
	// longer suspicion period. Use it when nodes are spread over
	// continents (RTTs of hundreds of ms, more loss).
	WAN
)

// Config configures Start.
type Config struct {
	// NodeID names the node in the cluster; it must be unique.
	NodeID string
	// BindAddr is "ip:port" for gossip (UDP and TCP) when Transport is nil.
	BindAddr string
	// AdvertiseAddr is "ip:port" other nodes use to reach this node;
	// defaults to BindAddr, or to the Transport's address.
	AdvertiseAddr string
	// Tags are the labels this node announces.
	Tags Labels
	// Join lists gossip addresses of existing members ("ip:port"). Start
	// returns once one of them answered. Empty: start a new cluster.
	Join []string
	// Transport carries gossip instead of real sockets (see NewTransport).
	Transport memberlist.NodeAwareTransport
	// Profile selects gossip timing.
	Profile Profile
	// SecretKey, if set, encrypts and authenticates all gossip (AES-GCM;
	// 16, 24 or 32 bytes, the same on every node): a node without it can
	// neither join nor read the membership.
	SecretKey []byte
	// EventBuffer bounds Events (default 256).
	EventBuffer int
	// KnownFile, if set, is where the members this node has seen are
	// remembered (see LoadKnown), so that it can rejoin them after a
	// restart whatever its join list.
	KnownFile string
	// Logger receives Serf's and memberlist's logs (default: discarded).
	Logger *slog.Logger
}

// Validate checks the config.
func (c Config) Validate() error {
	if err := validateID(c.NodeID); err != nil {
		return err
	}
	if c.Transport == nil {
		if _, _, err := splitIPPort(c.BindAddr); err != nil {
			return fmt.Errorf("%w: bind address: %w", ErrConfig, err)
		}
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitIPPort(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("%w: advertise address: %w", ErrConfig, err)
		}
	}
	if n := len(c.SecretKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("%w: gossip key of %d bytes; want 16, 24 or 32", ErrConfig, n)
	}
	return c.Tags.Validate()
}

// validateID accepts 1 to 128 bytes of [A-Za-z0-9._:-], the node ids the
// metadata registry accepts too.
func validateID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w: node id must be 1 to 128 bytes", ErrConfig)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("%w: node id %q may only contain letters, digits and . _ : -", ErrConfig, id)
		}
	}
	return nil
}

func splitIPPort(s string) (string, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("%q is not an IP address", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", s)
	}
	return host, p, nil
}

// serfConfig builds Serf's configuration; events go to ch.
func (c Config) serfConfig(ch chan<- serf.Event, logger *slog.Logger) (*serf.Config, error) {
	sc := serf.DefaultConfig()
	ml := memberlist.DefaultLANConfig()
	if c.Profile == WAN {
		ml = memberlist.DefaultWANConfig()
	}
	std := logging.StdLog(logger, nil)
	ml.Name = c.NodeID
	ml.Logger = std
	ml.LogOutput = nil
	if c.Transport != nil {
		ml.Transport = c.Transport
	} else {
		host, port, _ := splitIPPort(c.BindAddr)
		ml.BindAddr, ml.BindPort = host, port
		ml.AdvertiseAddr, ml.AdvertisePort = host, port
	}
	if c.AdvertiseAddr != "" {
		host, port, err := splitIPPort(c.AdvertiseAddr)
		if err != nil {
			return nil, err
		}
		ml.AdvertiseAddr, ml.AdvertisePort = host, port
	}
	if len(c.SecretKey) > 0 {
		ml.SecretKey = c.SecretKey // incoming and outgoing gossip must be encrypted (memberlist's defaults)
	}
	sc.MemberlistConfig = ml
	sc.NodeName = c.NodeID
	sc.Tags = c.Tags.tags()
	sc.EventCh = ch
	sc.Logger = std
	sc.LogOutput = nil
	sc.DisableCoordinates = false
	if c.Profile == WAN {
		sc.LeavePropagateDelay = 3 * time.Second
	}
	return sc, nil
}
