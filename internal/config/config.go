package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("config: invalid")

// Config is a node's whole configuration. Each field's `name` tag is both its
// command-line flag (--name) and its key in the YAML file; `default` is the
// value Default() gives it. An empty address disables that listener.
type Config struct {
	NodeID  string `name:"node-id" yaml:"node-id" default:"" help:"Node id, unique in the cluster (default: the host name)."`
	DataDir string `name:"data-dir" yaml:"data-dir" default:"./sextant-data" help:"Directory for the node's durable state."`

	ClusterAddr   string   `name:"cluster-addr" yaml:"cluster-addr" default:"" help:"HOST:PORT (TCP and UDP) for gossip, metadata and node-to-node links; empty runs the node alone."`
	Join          []string `name:"join" yaml:"join" default:"" sep:"," help:"Cluster addresses of nodes to join (HOST:PORT,...); empty starts a new cluster."`
	Site          string   `name:"site" yaml:"site" default:"default" help:"Site label: the edge site or datacentre of this node."`
	Zone          string   `name:"zone" yaml:"zone" default:"default" help:"Zone label: the failure domain inside the site."`
	Tier          string   `name:"tier" yaml:"tier" default:"core" enum:"edge,core" help:"Tier: core nodes vote in the metadata group, edge nodes keep a read copy."`
	ClusterTiming string   `name:"cluster-timing" yaml:"cluster-timing" default:"lan" enum:"lan,wan" help:"Gossip and metadata timeouts: lan (one region) or wan (nodes across continents)."`

	MQTTAddr  string `name:"mqtt-addr" yaml:"mqtt-addr" default:"127.0.0.1:1883" help:"MQTT over TCP listen address (empty disables)."`
	WSAddr    string `name:"ws-addr" yaml:"ws-addr" default:"127.0.0.1:8083" help:"MQTT over WebSocket listen address, path /mqtt (empty disables)."`
	AdminAddr string `name:"admin-addr" yaml:"admin-addr" default:"127.0.0.1:8088" help:"Admin HTTP listen address: /metrics, /healthz, /readyz, /v1 (empty disables)."`

	LogLevel  string `name:"log-level" yaml:"log-level" default:"info" enum:"debug,info,warn,error" help:"Log level: debug, info, warn or error."`
	LogFormat string `name:"log-format" yaml:"log-format" default:"text" enum:"text,json" help:"Log format: text or json."`

	Fsync         string        `name:"fsync" yaml:"fsync" default:"always" enum:"always,batch,never" help:"When durable writes reach the disk: always (before acknowledging), batch (every fsync-interval), never (left to the OS). See README."`
	FsyncInterval time.Duration `name:"fsync-interval" yaml:"fsync-interval" default:"100ms" help:"How often written data is fsynced with --fsync=batch."`

	MaxConnections    int           `name:"max-connections" yaml:"max-connections" default:"10000" help:"Most simultaneous client connections; further CONNECTs are refused with Server Busy."`
	ConnectTimeout    time.Duration `name:"connect-timeout" yaml:"connect-timeout" default:"10s" help:"A connection that has not sent CONNECT by then is closed."`
	MaxPacketSize     uint32        `name:"max-packet-size" yaml:"max-packet-size" default:"1048576" help:"Largest MQTT packet accepted, in bytes (whole packet)."`
	MaxKeepAlive      uint16        `name:"max-keepalive" yaml:"max-keepalive" default:"65535" help:"Largest keep alive granted, in seconds; MQTT 5 clients asking for more (or for none) get Server Keep Alive."`
	ReceiveMaximum    uint16        `name:"receive-maximum" yaml:"receive-maximum" default:"1024" help:"QoS 1/2 publishes a client may have unacknowledged towards the broker."`
	MaxInflight       uint16        `name:"max-inflight" yaml:"max-inflight" default:"1024" help:"QoS 1/2 messages the broker keeps unacknowledged towards one client (lowered to the client's Receive Maximum)."`
	MaxQueuedMessages int           `name:"max-queued-messages" yaml:"max-queued-messages" default:"10000" help:"Messages queued per session beyond the in-flight window; when full, the oldest QoS 0 message is dropped first."`
	MaxStoredMessages int           `name:"max-stored-messages" yaml:"max-stored-messages" default:"100000" help:"Messages kept on disk per persistent session beyond the in-memory queue; past it new messages are dropped and counted."`
	MaxSubscriptions  int           `name:"max-subscriptions" yaml:"max-subscriptions" default:"1000" help:"Subscriptions per client (0: unlimited)."`
	MaxTopicLength    int           `name:"max-topic-length" yaml:"max-topic-length" default:"65535" help:"Longest topic name or filter, in bytes."`
	MaxTopicLevels    int           `name:"max-topic-levels" yaml:"max-topic-levels" default:"128" help:"Most levels in a topic name or filter."`
	MaxClientIDLength int           `name:"max-client-id-length" yaml:"max-client-id-length" default:"256" help:"Longest client identifier accepted, in bytes."`
	TopicAliasMaximum uint16        `name:"topic-alias-maximum" yaml:"topic-alias-maximum" default:"64" help:"Topic aliases an MQTT 5 client may use towards the broker (0 disables)."`
	MaxSessionExpiry  time.Duration `name:"max-session-expiry" yaml:"max-session-expiry" default:"0s" help:"Cap on the session expiry a client may ask for (0: no cap)."`
	SlowConsumer      time.Duration `name:"slow-consumer-timeout" yaml:"slow-consumer-timeout" default:"5s" help:"How long a full subscriber queue may hold back a QoS 1/2 publisher before the subscriber is treated as slow."`
	WriteTimeout      time.Duration `name:"write-timeout" yaml:"write-timeout" default:"30s" help:"A client that accepts no bytes for this long is disconnected."`
	SysInterval       time.Duration `name:"sys-interval" yaml:"sys-interval" default:"10s" help:"How often $SYS/ statistics are published (0 disables)."`
}

// Validate checks the whole config and returns every problem found, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data-dir", "must not be empty")
	}
	for _, a := range []struct{ name, v string }{{"mqtt-addr", c.MQTTAddr}, {"ws-addr", c.WSAddr}, {"admin-addr", c.AdminAddr}} {
		if a.v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.v); err != nil || port == "" {
			bad(a.name, "%q is not HOST:PORT", a.v)
		}
	}
	if c.MQTTAddr == "" && c.WSAddr == "" {
		bad("mqtt-addr", "no client listener: set mqtt-addr or ws-addr")
	}
	oneOf := func(field, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
	oneOf("log-level", c.LogLevel, "debug", "info", "warn", "error")
	oneOf("log-format", c.LogFormat, "text", "json")
	oneOf("fsync", c.Fsync, "always", "batch", "never")
	oneOf("tier", c.Tier, "edge", "core")
	oneOf("cluster-timing", c.ClusterTiming, "lan", "wan")
	if c.ClusterAddr != "" {
		if host, port, err := net.SplitHostPort(c.ClusterAddr); err != nil || port == "" || port == "0" || net.ParseIP(host) == nil {
			bad("cluster-addr", "%q is not IP:PORT with a fixed port (other nodes dial it)", c.ClusterAddr)
		}
	}
	for _, j := range c.Join {
		if _, port, err := net.SplitHostPort(j); err != nil || port == "" {
			bad("join", "%q is not HOST:PORT", j)
		}
	}
	if len(c.Join) > 0 && c.ClusterAddr == "" {
		bad("join", "joining a cluster needs cluster-addr")
	}
	if c.NodeID != "" {
		for _, r := range c.NodeID {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-') || len(c.NodeID) > 128 {
				bad("node-id", "%q may only contain letters, digits and . _ : - (at most 128)", c.NodeID)
				break
			}
		}
	}
	if c.Fsync == "batch" && c.FsyncInterval <= 0 {
		bad("fsync-interval", "must be positive with fsync=batch")
	}
	positive := func(field string, v int) {
		if v <= 0 {
			bad(field, "must be positive, got %d", v)
		}
	}
	positive("max-connections", c.MaxConnections)
	positive("max-queued-messages", c.MaxQueuedMessages)
	positive("max-stored-messages", c.MaxStoredMessages)
	positive("max-topic-length", c.MaxTopicLength)
	positive("max-topic-levels", c.MaxTopicLevels)
	positive("max-client-id-length", c.MaxClientIDLength)
	positive("receive-maximum", int(c.ReceiveMaximum))
	positive("max-inflight", int(c.MaxInflight))
	if c.MaxSubscriptions < 0 {
		bad("max-subscriptions", "must not be negative")
	}
	if c.MaxTopicLength > 65535 {
		bad("max-topic-length", "MQTT strings are at most 65535 bytes")
	}
	if c.MaxClientIDLength > 65535 {
		bad("max-client-id-length", "MQTT strings are at most 65535 bytes")
	}
	if c.MaxPacketSize < 128 || c.MaxPacketSize > 268435460 {
		bad("max-packet-size", "%d is outside 128..268435460 (the MQTT maximum)", c.MaxPacketSize)
	}
	if c.ConnectTimeout <= 0 {
		bad("connect-timeout", "must be positive")
	}
	if c.SlowConsumer <= 0 {
		bad("slow-consumer-timeout", "must be positive")
	}
	if c.WriteTimeout <= 0 {
		bad("write-timeout", "must be positive")
	}
	if c.MaxSessionExpiry < 0 || c.SysInterval < 0 || c.FsyncInterval < 0 {
		bad("durations", "must not be negative")
	}
	return errors.Join(errs...)
}
