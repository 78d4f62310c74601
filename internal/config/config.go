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
	DataDir string `name:"data-dir" yaml:"data-dir" default:"./sextant-data" help:"Directory for the node's durable state: sextant.db (sessions, queues, retained messages), meta/ (the metadata group) and groups/ (one directory per placement group replicated here: its Raft log, snapshots and topic log)."`

	ClusterAddr   string   `name:"cluster-addr" yaml:"cluster-addr" default:"" help:"HOST:PORT (TCP and UDP) for gossip, metadata and node-to-node links; empty runs the node alone."`
	Join          []string `name:"join" yaml:"join" default:"" sep:"," help:"Cluster addresses of nodes to join (HOST:PORT,...); empty starts a new cluster."`
	Site          string   `name:"site" yaml:"site" default:"default" help:"Site label: the edge site or datacentre of this node."`
	Zone          string   `name:"zone" yaml:"zone" default:"default" help:"Zone label: the failure domain inside the site."`
	Tier          string   `name:"tier" yaml:"tier" default:"core" enum:"edge,core" help:"Tier: core nodes vote in the metadata group, edge nodes keep a read copy."`
	ClusterTLS    bool     `name:"cluster-tls" yaml:"cluster-tls" default:"false" help:"Node-to-node links and the metadata group over mutual TLS with tls-cert, tls-key and tls-ca (every node's certificate signed by that CA)."`
	ClusterKey    string   `name:"cluster-key-file" yaml:"cluster-key-file" default:"" help:"File holding the gossip encryption key, base64 of 16, 24 or 32 random bytes, the same on every node (e.g. openssl rand -base64 32 > key); empty: gossip in clear."`
	ClusterTiming string   `name:"cluster-timing" yaml:"cluster-timing" default:"lan" enum:"lan,wan" help:"Gossip and metadata timeouts: lan (one region) or wan (nodes across continents)."`

	MQTTAddr  string `name:"mqtt-addr" yaml:"mqtt-addr" default:"127.0.0.1:1883" help:"MQTT over TCP listen address (empty disables)."`
	WSAddr    string `name:"ws-addr" yaml:"ws-addr" default:"127.0.0.1:8083" help:"MQTT over WebSocket listen address, path /mqtt (empty disables)."`
	MQTTSAddr string `name:"mqtts-addr" yaml:"mqtts-addr" default:"" help:"MQTT over TLS listen address, e.g. 0.0.0.0:8883 (empty disables; needs tls-cert and tls-key)."`
	WSSAddr   string `name:"wss-addr" yaml:"wss-addr" default:"" help:"MQTT over secure WebSocket listen address, path /mqtt (empty disables; needs tls-cert and tls-key)."`
	AdminAddr string `name:"admin-addr" yaml:"admin-addr" default:"127.0.0.1:8088" help:"Admin HTTP listen address: /metrics, /healthz, /readyz, /v1 (empty disables)."`

	TLSCert       string `name:"tls-cert" yaml:"tls-cert" default:"" help:"PEM certificate (with its chain) of the TLS listeners; reloaded on SIGHUP."`
	TLSKey        string `name:"tls-key" yaml:"tls-key" default:"" help:"PEM private key of tls-cert; reloaded on SIGHUP."`
	TLSCA         string `name:"tls-ca" yaml:"tls-ca" default:"" help:"PEM CA certificates that client certificates are verified against (mTLS); reloaded on SIGHUP."`
	TLSClientAuth string `name:"tls-client-auth" yaml:"tls-client-auth" default:"none" enum:"none,request,require" help:"Client certificates on the MQTT TLS listeners: none, request (verified when given) or require."`
	TLSIdentity   string `name:"tls-identity" yaml:"tls-identity" default:"none" enum:"none,cn,san" help:"Identify clients by their verified certificate: none, cn (subject common name) or san (first DNS name, else e-mail, else URI)."`
	AdminTLS      bool   `name:"admin-tls" yaml:"admin-tls" default:"false" help:"Serve the admin API over TLS with tls-cert and tls-key."`

	AllowAnonymous string        `name:"allow-anonymous" yaml:"allow-anonymous" default:"auto" enum:"auto,true,false" help:"Accept clients with no user name or certificate identity: auto accepts them only when every client listener is on loopback."`
	PasswordFile   string        `name:"password-file" yaml:"password-file" default:"" help:"File of user:bcrypt-hash lines (write it with sextant passwd); reloaded on SIGHUP."`
	ACLFile        string        `name:"acl-file" yaml:"acl-file" default:"" help:"YAML access control list (docs/security.md); once set, access is denied unless a rule allows it. Reloaded on SIGHUP."`
	SysAccess      string        `name:"sys-access" yaml:"sys-access" default:"loopback" enum:"loopback,all,none" help:"Who may subscribe to $SYS/ statistics when there is no acl-file: clients on loopback (loopback), every client (all) or nobody (none). With an acl-file its rules decide."`
	AuthFailDelay  time.Duration `name:"auth-fail-delay" yaml:"auth-fail-delay" default:"1s" help:"How long a CONNECT that failed authentication waits before its refusal is sent."`

	AdminToken     string `name:"admin-token" yaml:"admin-token" default:"" help:"Bearer token of the admin API's admin scope (every endpoint); needed when admin-addr is not on loopback, unless admin-token-file is set."`
	AdminTokenFile string `name:"admin-token-file" yaml:"admin-token-file" default:"" help:"File holding the admin-scope token, instead of admin-token; reloaded on SIGHUP."`
	AdminReadToken string `name:"admin-read-token" yaml:"admin-read-token" default:"" help:"Bearer token of the admin API's read scope (GET endpoints and /metrics)."`

	LogLevel  string `name:"log-level" yaml:"log-level" default:"info" enum:"debug,info,warn,error" help:"Log level: debug, info, warn or error."`
	LogFormat string `name:"log-format" yaml:"log-format" default:"auto" enum:"auto,text,json,journal" help:"Log format: text, json, journal (text without timestamps, each line prefixed with its syslog priority, for the systemd journal) or auto (journal when stderr is the journal, else text)."`

	Procs int `name:"procs" yaml:"procs" default:"0" help:"Processors (GOMAXPROCS) running the node's Go code at once. 0 adapts: one while the node uses under half a core, every core it may use as soon as it needs more (a load above 0.7 of a core widens within 0.25 s), since at everyday rates a second processor costs more in thread wake-ups than it gives. N fixes N. The GOMAXPROCS environment variable, if set, fixes it too."`

	Fsync         string        `name:"fsync" yaml:"fsync" default:"always" enum:"always,batch,never" help:"When durable writes reach the disk: always (before acknowledging), batch (every fsync-interval), never (left to the OS). See README."`
	FsyncInterval time.Duration `name:"fsync-interval" yaml:"fsync-interval" default:"100ms" help:"How often written data is fsynced with --fsync=batch."`

	MaxConnections    int           `name:"max-connections" yaml:"max-connections" default:"10000" help:"Most simultaneous client connections; further CONNECTs are refused with Server Busy."`
	MaxConnsPerIP     int           `name:"max-connections-per-ip" yaml:"max-connections-per-ip" default:"1000" help:"Most simultaneous connections from one IP address (IPv6: one /64); more are closed when accepted (0: unlimited)."`
	ConnectRatePerIP  int           `name:"connect-rate-per-ip" yaml:"connect-rate-per-ip" default:"100" help:"New connections per second from one IP address (IPv6: one /64), in bursts of up to as many; beyond it CONNECT is refused with 0x9F (0: unlimited)."`
	ConnectTimeout    time.Duration `name:"connect-timeout" yaml:"connect-timeout" default:"10s" help:"A connection that has not sent CONNECT by then is closed."`
	MaxPacketSize     uint32        `name:"max-packet-size" yaml:"max-packet-size" default:"1048576" help:"Largest MQTT packet accepted, in bytes (whole packet)."`
	MaxKeepAlive      uint16        `name:"max-keepalive" yaml:"max-keepalive" default:"65535" help:"Largest keep alive granted, in seconds; MQTT 5 clients asking for more (or for none) get Server Keep Alive."`
	ReceiveMaximum    uint16        `name:"receive-maximum" yaml:"receive-maximum" default:"1024" help:"QoS 1/2 publishes a client may have unacknowledged towards the broker."`
	MaxInflight       uint16        `name:"max-inflight" yaml:"max-inflight" default:"1024" help:"QoS 1/2 messages the broker keeps unacknowledged towards one client (lowered to the client's Receive Maximum)."`
	MaxQueuedMessages int           `name:"max-queued-messages" yaml:"max-queued-messages" default:"10000" help:"Messages queued per session beyond the in-flight window; when full, the oldest QoS 0 message is dropped first."`
	MaxStoredMessages int           `name:"max-stored-messages" yaml:"max-stored-messages" default:"100000" help:"Messages kept on disk per persistent session beyond the in-memory queue; past it new messages are dropped and counted."`
	MaxSubscriptions  int           `name:"max-subscriptions" yaml:"max-subscriptions" default:"1000" help:"Subscriptions per client (0: unlimited)."`
	PublishRate       int           `name:"publish-rate" yaml:"publish-rate" default:"10000" help:"PUBLISH packets per second one client may send, in bursts of up to as many (0: unlimited)."`
	PublishBytes      int           `name:"publish-bytes" yaml:"publish-bytes" default:"16777216" help:"Topic and payload bytes per second one client may publish, in bursts of up to as many or one largest packet (0: unlimited)."`
	LimitLoopback     bool          `name:"limit-loopback" yaml:"limit-loopback" default:"false" help:"Apply the per-address and per-client publish limits to clients on loopback addresses too (by default the node's own host is trusted: local gateways and benchmarks)."`
	PublishLimit      string        `name:"publish-limit-action" yaml:"publish-limit-action" default:"pause" enum:"pause,disconnect" help:"A client over publish-rate or publish-bytes: pause (stop reading from it until it is back under) or disconnect (MQTT 5: DISCONNECT 0x96, or 0x97 for bytes)."`
	MaxTopicLength    int           `name:"max-topic-length" yaml:"max-topic-length" default:"65535" help:"Longest topic name or filter, in bytes."`
	MaxTopicLevels    int           `name:"max-topic-levels" yaml:"max-topic-levels" default:"128" help:"Most levels in a topic name or filter."`
	MaxClientIDLength int           `name:"max-client-id-length" yaml:"max-client-id-length" default:"256" help:"Longest client identifier accepted, in bytes."`
	TopicAliasMaximum uint16        `name:"topic-alias-maximum" yaml:"topic-alias-maximum" default:"64" help:"Topic aliases an MQTT 5 client may use towards the broker (0 disables)."`
	MaxSessionExpiry  time.Duration `name:"max-session-expiry" yaml:"max-session-expiry" default:"0s" help:"Cap on the session expiry a client may ask for (0: no cap)."`
	SlowConsumer      time.Duration `name:"slow-consumer-timeout" yaml:"slow-consumer-timeout" default:"5s" help:"How long a full subscriber queue may hold back a QoS 1/2 publisher before the subscriber is treated as slow."`
	WriteTimeout      time.Duration `name:"write-timeout" yaml:"write-timeout" default:"30s" help:"A client that accepts no bytes for this long is disconnected."`
	SysInterval       time.Duration `name:"sys-interval" yaml:"sys-interval" default:"10s" help:"How often $SYS/ statistics are published (0 disables)."`

	PlacementPolicy    string        `name:"placement-policy" yaml:"placement-policy" default:"center" enum:"center,centroid,allpairs,hash,publisher" help:"How the placement manager ranks homes for a sequenced topic's group: center (smallest enclosing ball of its clients' coordinates), centroid (ePulsar's rule), allpairs (worst producer-consumer pair), hash (latency-agnostic), publisher (the busiest publisher's node). With hash and publisher a group moves only for overload or when its home leaves, never for latency. See docs/placement.md."`
	PlacementInterval  time.Duration `name:"placement-interval" yaml:"placement-interval" default:"5s" help:"How often every node reports its load and its sequenced topics' clients to the metadata leader, and the leader's placement manager plans (an overload or a latency violation is looked at sooner, at most every fifth of it)."`
	PlacementOverload  int           `name:"placement-overload-percent" yaml:"placement-overload-percent" default:"85" help:"CPU, memory or network utilisation, in percent, above which a node is overloaded and sheds its busiest sequenced topics' groups (only when moving them can bring it under)."`
	PlacementMaxOut    int           `name:"placement-max-out-rate" yaml:"placement-max-out-rate" default:"0" help:"Messages per second a node may send before it is overloaded (0: no limit)."`
	PlacementNetwork   int64         `name:"placement-network-capacity" yaml:"placement-network-capacity" default:"0" help:"Bytes per second the node's network carries; its network utilisation is its client and peer traffic over this (0: not measured, never an overload)."`
	PlacementMargin    time.Duration `name:"placement-margin" yaml:"placement-margin" default:"2ms" help:"Hysteresis: a group moves for latency only if its new home's estimated worst-case latency is lower by more than this and by more than placement-margin-percent."`
	PlacementMarginPc  int           `name:"placement-margin-percent" yaml:"placement-margin-percent" default:"5" help:"Hysteresis: the least gain, in percent of the current estimate, for a move for latency."`
	PlacementConfirm   int           `name:"placement-confirm" yaml:"placement-confirm" default:"3" help:"Hysteresis: planning rounds (placement-interval apart) a move for latency must be indicated in, towards the same node, before it is decided (1: at once)."`
	PlacementCooldown  time.Duration `name:"placement-cooldown" yaml:"placement-cooldown" default:"30s" help:"Hysteresis: after a group moves it is not moved again for latency or load for this long (rounded up to whole placement-intervals)."`
	PlacementCoord     string        `name:"placement-coordinate" yaml:"placement-coordinate" default:"" help:"For tests and labs on one machine, where the network shows no distances: the network coordinate this node reports to placement instead of the one gossip measures, as milliseconds along up to 8 axes (e.g. 0,40: 40 ms from a node at 0,0). Set it on every node or on none. Empty: measured."`
	PlacementExecutors int           `name:"placement-executors" yaml:"placement-executors" default:"16" help:"Migrations of sequenced topics' groups this node carries out at once as their home (a pool of workers; each moves one group: hands over its log or its lead, with the group's publishes held for the switch). 1 to 1024."`

	DrainTimeout    time.Duration `name:"drain-timeout" yaml:"drain-timeout" default:"15s" help:"On SIGTERM or a drain, how long to wait for connected persistent sessions to be taken over by other nodes before stopping (0: do not wait; a node running alone never waits)."`
	ShutdownTimeout time.Duration `name:"shutdown-timeout" yaml:"shutdown-timeout" default:"30s" help:"Bound on the whole stop after SIGTERM, drain included: past it the process exits with what is not yet closed. Keep it below the service manager's stop timeout."`

	ReplicationTiming   string        `name:"replication-timing" yaml:"replication-timing" default:"lan" enum:"lan,wan" help:"Raft timing of replicated placement groups (sequenced topics with replicas 3 or 5): lan (replicas in one region; a dead home is replaced in about 0.3 s) or wan (replicas across regions; a few seconds)."`
	GroupRecentBytes    int64         `name:"group-recent-bytes" yaml:"group-recent-bytes" default:"1048576" help:"Memory per placement group for its newest records, decoded, so that live feeds and reads near the log's end are answered without reading the segment files; only groups being written fill it. 0 keeps none (every read goes to the log). At most 1 GiB."`
	ReplicationPipeline int           `name:"replication-pipeline" yaml:"replication-pipeline" default:"4" help:"AppendEntries a replicated placement group's leader keeps in flight to each follower, 1 to 64: more hide a longer round trip (replicas across regions) at the cost of resending more after a refused append. 1 sends one at a time."`
	MaxGroups           int           `name:"max-groups" yaml:"max-groups" default:"256" help:"Placement groups this node may replicate (its group budget): a node at its budget is not chosen as a new group's home or replica, and opens no more. Each replicated group costs heartbeats and memory whether it is used or not (docs/design/replication.md)."`
	RetentionMessages   int64         `name:"retention-messages" yaml:"retention-messages" default:"100000" help:"History kept per sequenced topic whose policy rule sets no retention: at least this many messages (0: no count bound). Applies to groups created afterwards."`
	RetentionAge        time.Duration `name:"retention-age" yaml:"retention-age" default:"24h" help:"History kept per sequenced topic whose policy rule sets no retention: messages at least this young (0: no age bound). A message goes once either bound lets it go; both 0 keeps everything."`
	RetentionInterval   time.Duration `name:"retention-interval" yaml:"retention-interval" default:"1m" help:"How often a placement group's home applies its retention bounds."`
	SequencedInflight   int           `name:"sequenced-inflight" yaml:"sequenced-inflight" default:"4096" help:"Sequenced publishes an access node keeps unacknowledged per placement group; beyond it QoS 1/2 publishers wait for room (up to slow-consumer-timeout, then the publish fails with 0x97) and QoS 0 messages are dropped, counted."`
}

// Validate checks the whole config and returns every problem found, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, invalid("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data-dir", "must not be empty")
	}
	for _, a := range []struct{ name, v string }{{"mqtt-addr", c.MQTTAddr}, {"ws-addr", c.WSAddr}, {"mqtts-addr", c.MQTTSAddr}, {"wss-addr", c.WSSAddr}, {"admin-addr", c.AdminAddr}} {
		if a.v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.v); err != nil || port == "" {
			bad(a.name, "%q is not HOST:PORT", a.v)
		}
	}
	if len(c.ClientListeners()) == 0 {
		bad("mqtt-addr", "no client listener: set mqtt-addr, ws-addr, mqtts-addr or wss-addr")
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
	oneOf("log-format", c.LogFormat, "auto", "text", "json", "journal")
	oneOf("fsync", c.Fsync, "always", "batch", "never")
	oneOf("tier", c.Tier, "edge", "core")
	oneOf("cluster-timing", c.ClusterTiming, "lan", "wan")
	oneOf("tls-client-auth", c.TLSClientAuth, "none", "request", "require")
	oneOf("tls-identity", c.TLSIdentity, "none", "cn", "san")
	oneOf("allow-anonymous", c.AllowAnonymous, "auto", "true", "false")
	oneOf("sys-access", c.SysAccess, "loopback", "all", "none")
	oneOf("publish-limit-action", c.PublishLimit, "pause", "disconnect")
	c.validateSecurity(bad)
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
	if c.ClusterTLS && (c.TLSCert == "" || c.TLSKey == "" || c.TLSCA == "") {
		bad("cluster-tls", "needs tls-cert, tls-key and tls-ca")
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
	for _, f := range []struct {
		name string
		v    int
	}{{"max-subscriptions", c.MaxSubscriptions}, {"max-connections-per-ip", c.MaxConnsPerIP}, {"connect-rate-per-ip", c.ConnectRatePerIP}, {"publish-rate", c.PublishRate}, {"publish-bytes", c.PublishBytes}} {
		if f.v < 0 {
			bad(f.name, "must not be negative (0: unlimited)")
		}
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
	if c.MaxSessionExpiry < 0 || c.SysInterval < 0 || c.FsyncInterval < 0 || c.AuthFailDelay < 0 || c.DrainTimeout < 0 {
		bad("durations", "must not be negative")
	}
	oneOf("replication-timing", c.ReplicationTiming, "lan", "wan")
	if c.GroupRecentBytes < 0 || c.GroupRecentBytes > 1<<30 {
		bad("group-recent-bytes", "must be 0 to 1073741824")
	}
	if c.ReplicationPipeline < 1 || c.ReplicationPipeline > 64 {
		bad("replication-pipeline", "must be 1 to 64")
	}
	positive("max-groups", c.MaxGroups)
	positive("sequenced-inflight", c.SequencedInflight)
	if c.RetentionMessages < 0 || c.RetentionAge < 0 {
		bad("retention", "retention-messages and retention-age must not be negative (0: no bound)")
	}
	if c.RetentionInterval <= 0 {
		bad("retention-interval", "must be positive")
	}
	oneOf("placement-policy", c.PlacementPolicy, "center", "centroid", "allpairs", "hash", "publisher")
	if c.PlacementInterval < 100*time.Millisecond || c.PlacementInterval > time.Hour {
		bad("placement-interval", "%v is outside 100ms..1h", c.PlacementInterval)
	}
	if c.PlacementOverload < 1 || c.PlacementOverload > 100 {
		bad("placement-overload-percent", "%d is outside 1..100", c.PlacementOverload)
	}
	if c.PlacementMarginPc < 0 || c.PlacementMarginPc > 100 {
		bad("placement-margin-percent", "%d is outside 0..100", c.PlacementMarginPc)
	}
	if c.PlacementExecutors < 1 || c.PlacementExecutors > 1024 {
		bad("placement-executors", "%d is outside 1..1024", c.PlacementExecutors)
	}
	if c.PlacementConfirm < 1 || c.PlacementConfirm > 1000 {
		bad("placement-confirm", "%d is outside 1..1000 rounds", c.PlacementConfirm)
	}
	if c.PlacementMaxOut < 0 || c.PlacementNetwork < 0 || c.PlacementMargin < 0 || c.PlacementCooldown < 0 {
		bad("placement", "placement-max-out-rate, placement-network-capacity, placement-margin and placement-cooldown must not be negative")
	}
	if c.Procs < 0 || c.Procs > 4096 {
		bad("procs", "%d: 0 (adapt) or 1 to 4096", c.Procs)
	}
	if _, err := ParseCoordinate(c.PlacementCoord); err != nil {
		bad("placement-coordinate", "%v", err)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive")
	} else if c.DrainTimeout >= c.ShutdownTimeout {
		bad("drain-timeout", "%v leaves no time to stop within shutdown-timeout %v", c.DrainTimeout, c.ShutdownTimeout)
	}
	return joinProblems(errs)
}
