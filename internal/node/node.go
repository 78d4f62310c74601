package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/cluster"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/listener"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/monitor/agent"
	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/run"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// Options are the process-level inputs that are not configuration: what
// the node runs on (its network and clock) and what tests adjust. `sextant
// serve` sets only Log and Version; in-process test clusters
// (internal/clustertest) set the rest.
type Options struct {
	Log     *slog.Logger
	Version string
	// Clock is the node's time source (nil: the wall clock).
	Clock clock.Clock
	// Network is where the node listens and dials: its client listeners,
	// admin API and cluster address (nil: the host's TCP and UDP).
	Network Network
	// Seed seeds the peer links' reconnection jitter (0: from the clock).
	Seed uint64
	// Ephemeral keeps nothing durable: the broker runs without its store
	// (sessions, queues and retained messages live in memory only) and the
	// metadata group keeps its log in memory, so a restarted node is a new
	// one. For in-process test clusters and benchmarks that measure the
	// data path without a disk.
	Ephemeral bool
	// Cluster adjusts the cluster layer's config before it is built (tests
	// shorten its timeouts).
	Cluster func(*cluster.Config)
	// GroupSegmentBytes is the size of placement groups' topic-log
	// segments (0: the topic log's default, 16 MiB); tests make it small
	// so that retention, which removes whole sealed segments, acts on
	// little data.
	GroupSegmentBytes int64
	// Placement adjusts the monitoring agent's config before it is built
	// (tests fake the process's load).
	Placement func(*agent.Config)
}

// Network is where a node listens and dials: TCP streams and UDP
// datagrams on the host (netx.Host), or an in-memory network in tests
// (memnet's Host).
type Network interface {
	Listen(addr string) (net.Listener, error)
	ListenPacket(addr string) (net.PacketConn, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

var _ Network = netx.Host{}

// Timeouts of the node's own work.
const (
	// adminReadHeaderTimeout bounds reading an admin request's headers.
	adminReadHeaderTimeout = 10 * time.Second
)

// Node is one running Sextant node.
type Node struct {
	cfg     config.Config
	opts    Options
	log     *slog.Logger
	clock   clock.Clock
	net     Network
	version string
	started time.Time
	// cpus is the processor count at New: the capacity the node's load
	// reports use, fixed before the serve command may narrow GOMAXPROCS
	// to the load (internal/procs).
	cpus int
	// group runs the node's own goroutines (the admin server, joining the
	// metadata group, registering in it); its context is the node's root
	// context and ends when Shutdown begins.
	group *run.Group

	metrics  *metrics.Node
	store    *store.Store // nil when Ephemeral
	broker   *broker.Broker
	cluster  *clusterParts
	peering  peering // rejoin.go
	security *security
	reloadMu sync.Mutex // one Reload at a time
	drain    drainState // drain.go

	mu struct {
		sync.Mutex
		listeners map[string]*listener.Server // by kind: mqtt, ws, mqtts, wss
		bound     map[string]net.Listener     // by kind, admin included: bound in Start before serving
		admin     *http.Server
		adminAPI  *adminapi.Server
		adminLn   net.Listener
		ready     bool
		shutdown  bool
	}
}

// clientListenerKinds are the kinds of MQTT listener, in start order.
var clientListenerKinds = []string{"mqtt", "ws", "mqtts", "wss"}

// New validates cfg, opens the node's store and loads its state. It does not
// listen yet: see Start.
func New(cfg config.Config, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Network == nil {
		opts.Network = netx.Host{}
	}
	if cfg.NodeID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "sextant"
		}
		cfg.NodeID = h
	}
	n := &Node{cfg: cfg, opts: opts, log: opts.Log, clock: opts.Clock, net: opts.Network, version: opts.Version, cpus: runtime.GOMAXPROCS(0),
		metrics: metrics.NewNode(), group: run.NewGroup(context.Background())}
	sec, err := newSecurity(cfg, n.clock, n.metrics, n.log)
	if err != nil {
		return nil, err
	}
	n.security = sec
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	var st broker.Store // nil interface when ephemeral, not a nil *store.Store
	if !opts.Ephemeral {
		mode, err := store.ParseFsyncMode(cfg.Fsync)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		n.store, err = store.Open(filepath.Join(cfg.DataDir, "sextant.db"), store.Options{
			Fsync: mode, SyncInterval: cfg.FsyncInterval, Observer: storeObserver{m: n.metrics, always: mode == store.FsyncAlways}, Clock: n.clock,
		})
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		st = n.store
	}
	bcfg := broker.Config{
		Limits:         LimitsFrom(cfg),
		MaxConnections: cfg.MaxConnections,
		SysInterval:    cfg.SysInterval,
		Version:        opts.Version,
	}
	bcfg.Auth = newSessionAuth(sec.auth, cfg, n.clock, n.log)
	n.broker, err = broker.New(bcfg, st, n.clock, n.log, n.metrics)
	if err != nil {
		if n.store != nil {
			_ = n.store.Close()
		}
		return nil, err
	}
	return n, nil
}

// LimitsFrom maps the config onto the session limits.
func LimitsFrom(cfg config.Config) session.Limits {
	maxExpiry := uint32(0)
	if cfg.MaxSessionExpiry > 0 {
		maxExpiry = uint32(min(cfg.MaxSessionExpiry/time.Second, session.NeverExpire-1))
	}
	return session.Limits{
		MaxPacketSize:     cfg.MaxPacketSize,
		ReceiveMaximum:    cfg.ReceiveMaximum,
		MaxInflight:       cfg.MaxInflight,
		MaxQueued:         cfg.MaxQueuedMessages,
		MaxStored:         cfg.MaxStoredMessages,
		TopicAliasMaximum: cfg.TopicAliasMaximum,
		MaxKeepAlive:      cfg.MaxKeepAlive,
		MaxSubscriptions:  cfg.MaxSubscriptions,
		MaxTopicLength:    cfg.MaxTopicLength,
		MaxTopicLevels:    cfg.MaxTopicLevels,
		MaxClientIDLength: cfg.MaxClientIDLength,
		MaxSessionExpiry:  maxExpiry,
		ConnectTimeout:    cfg.ConnectTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		SlowConsumer:      cfg.SlowConsumer,
		AuthFailDelay:     cfg.AuthFailDelay,
		PublishRate:       cfg.PublishRate,
		LimitLoopback:     cfg.LimitLoopback,
		PublishBytes:      cfg.PublishBytes,
		PublishDisconnect: cfg.PublishLimit == "disconnect",
	}
}

// storeObserver records the store's timings. sextant_store_sync_seconds
// counts the points at which data became durable: with fsync=always bbolt
// syncs inside each commit (its write time includes both fdatasyncs), so
// each commit is one; with batch and never, the store's explicit syncs.
type storeObserver struct {
	m      *metrics.Node
	always bool
}

var _ store.Observer = storeObserver{}

func (o storeObserver) ObserveCommit(ci store.CommitInfo) {
	o.m.StoreBatchOps.Observe(float64(ci.Ops))
	o.m.StoreCommitSeconds.Observe((ci.Apply + ci.Write).Seconds())
	if o.always {
		o.m.StoreSyncSeconds.Observe(ci.Write.Seconds())
	}
}

func (o storeObserver) ObserveSync(d time.Duration) { o.m.StoreSyncSeconds.Observe(d.Seconds()) }

// Start binds the configured listeners and starts serving.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.started = n.clock.Now()
	// Bind every listener first: membership announces their addresses. The
	// cluster parts start next, so the broker knows its cluster before the
	// first client is served and the admin API finds them in place.
	n.mu.listeners = map[string]*listener.Server{}
	n.mu.bound = map[string]net.Listener{}
	addrs := map[string]string{"mqtt": n.cfg.MQTTAddr, "ws": n.cfg.WSAddr, "mqtts": n.cfg.MQTTSAddr, "wss": n.cfg.WSSAddr, "admin": n.cfg.AdminAddr}
	for _, kind := range append(clientListenerKinds, "admin") {
		a := addrs[kind]
		if a == "" {
			continue
		}
		ln, err := n.net.Listen(a)
		if err != nil {
			return n.startFailed(fmt.Errorf("node: %s listener: %w", kind, err))
		}
		n.mu.bound[kind] = ln
	}
	n.mu.adminLn = n.mu.bound["admin"]
	if err := n.startCluster(n.group.Context()); err != nil {
		return n.startFailed(err)
	}
	n.registerOpsMetrics()
	for _, kind := range clientListenerKinds {
		ln := n.mu.bound[kind]
		if ln == nil {
			continue
		}
		opts := listener.Options{Limiter: n.security.limiter}
		if kind == "mqtts" || kind == "wss" {
			opts.TLS = n.security.certs.MQTTConfig()
		}
		if kind == "mqtt" || kind == "mqtts" {
			n.mu.listeners[kind] = listener.ServeTCP(ln, n.broker, n.log, opts)
		} else {
			n.mu.listeners[kind] = listener.ServeWebSocket(ln, n.broker, n.log, opts)
		}
	}
	if ln := n.mu.adminLn; ln != nil {
		api := n.newAdminAPI()
		api.SetTokens(n.security.adminToken, n.security.readToken)
		n.mu.adminAPI = api
		n.mu.admin = &http.Server{Handler: api, ReadHeaderTimeout: adminReadHeaderTimeout, ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
		srv := n.mu.admin
		if n.cfg.AdminTLS {
			ln = tls.NewListener(ln, n.security.certs.AdminConfig())
		}
		n.group.Go(func(context.Context) {
			if serr := srv.Serve(ln); serr != nil && !errors.Is(serr, http.ErrServerClosed) {
				n.log.Error("admin listener stopped", "err", serr)
			}
		})
	}
	n.mu.ready = true
	n.log.Info("sextant node serving", "node", n.cfg.NodeID, "mqtt", n.addrLocked("mqtt"), "ws", n.addrLocked("ws"),
		"mqtts", n.addrLocked("mqtts"), "wss", n.addrLocked("wss"), "admin", n.addrLocked("admin"),
		"cluster", n.cfg.ClusterAddr, "data", n.cfg.DataDir, "fsync", n.cfg.Fsync)
	return nil
}

func (n *Node) startFailed(err error) error {
	for _, l := range n.mu.listeners {
		_ = l.Close()
	}
	for _, ln := range n.mu.bound {
		_ = ln.Close()
	}
	if n.cluster != nil {
		_ = n.closeCluster()
		n.cluster = nil
	}
	return err
}

// Addr returns the bound address of a listener ("mqtt", "ws", "admin"), or "".
func (n *Node) Addr(kind string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrLocked(kind)
}

func (n *Node) addrLocked(kind string) string {
	if ln := n.mu.bound[kind]; ln != nil {
		return ln.Addr().String()
	}
	return ""
}

// Broker exposes the node's broker (tests and the cluster layer use it).
func (n *Node) Broker() *broker.Broker { return n.broker }

// Store exposes the node's store (nil when Ephemeral), for tests.
func (n *Node) Store() *store.Store { return n.store }

// ClusterLayer exposes the node's cluster layer (nil when it runs alone or
// before Start), for tests.
func (n *Node) ClusterLayer() *cluster.Layer {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.layer
}

// Metrics exposes the node's metric set.
func (n *Node) Metrics() *metrics.Node { return n.metrics }

// Status implements adminapi.Node.
func (n *Node) Status() adminapi.Status {
	st := n.broker.Stats()
	n.mu.Lock()
	listeners := map[string]string{}
	for _, k := range append(clientListenerKinds, "admin") {
		if a := n.addrLocked(k); a != "" {
			listeners[k] = a
		}
	}
	started := n.started
	n.mu.Unlock()
	return adminapi.Status{
		NodeID: n.cfg.NodeID, Version: n.version, StartedAt: started,
		Uptime: n.clock.Now().Sub(started).Seconds(), Listeners: listeners,
		Broker: adminapi.BrokerStatus{
			Connections: st.Connections, Sessions: st.Sessions, Online: st.Online,
			Subscriptions: st.Subscriptions, Retained: st.Retained,
		},
	}
}

// Ready implements adminapi.Node: the node serves clients, is not
// draining, and, in a cluster, is not cut off from the other nodes
// (clusterReady).
func (n *Node) Ready() error {
	n.mu.Lock()
	switch {
	case n.mu.shutdown:
		n.mu.Unlock()
		return errors.New("shutting down")
	case !n.mu.ready:
		n.mu.Unlock()
		return errors.New("starting")
	}
	n.mu.Unlock()
	if err := n.drain.readyErr(); err != nil {
		return err
	}
	return n.clusterReady()
}

// Shutdown stops the node gracefully: stop accepting, tell the cluster the
// node leaves, disconnect clients (DISCONNECT 0x8B to MQTT 5 clients),
// flush and close the store, then stop the admin API. It returns the first
// error; ctx bounds the wait for clients.
func (n *Node) Shutdown(ctx context.Context) error { return n.stop(ctx, true) }

// Halt stops the node as Shutdown does, except that it does not tell the
// cluster it leaves: the other nodes find it failed, as after a crash or a
// kill -9 (in-process test clusters use it to fail a node).
func (n *Node) Halt(ctx context.Context) error { return n.stop(ctx, false) }

func (n *Node) stop(ctx context.Context, leave bool) error {
	n.mu.Lock()
	if n.mu.shutdown {
		n.mu.Unlock()
		return nil
	}
	n.mu.shutdown = true
	var ls []*listener.Server
	for _, kind := range clientListenerKinds {
		if l := n.mu.listeners[kind]; l != nil {
			ls = append(ls, l)
		}
	}
	admin := n.mu.admin
	n.mu.Unlock()
	n.group.Stop() // ends the metadata join and registration, if still trying
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	if leave {
		n.leaveCluster(ctx)
	}
	errs = append(errs, n.broker.Close(ctx))
	for _, l := range ls {
		errs = append(errs, l.Wait(ctx))
	}
	if n.cluster != nil {
		errs = append(errs, n.closeCluster())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if admin != nil {
		errs = append(errs, admin.Shutdown(ctx))
	}
	n.group.Wait()
	n.log.Info("sextant node stopped", "node", n.cfg.NodeID)
	return errors.Join(errs...)
}

// Reload reads the TLS certificate, key and CA (of the listeners and, with
// cluster-tls, of node-to-node connections), the password file, the ACL
// and the admin token file again (SIGHUP). Connections are not dropped:
// established TLS sessions keep their certificate, new handshakes get the
// new one; sessions follow the new ACL on their next check. A file that
// fails to load leaves its predecessor in use, and the error says which.
func (n *Node) Reload() error {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	err := n.security.reload()
	if cp := n.cluster; cp != nil && cp.tls != nil {
		if cerr := cp.tls.Reload(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("node: cluster-tls: %w", cerr))
		}
	}
	n.mu.Lock()
	api := n.mu.adminAPI
	n.mu.Unlock()
	if api != nil {
		api.SetTokens(n.security.adminToken, n.security.readToken)
	}
	if err != nil {
		n.log.Error("reload: keeping the previous version of what failed", "err", err)
		return err
	}
	attrs := []any{"password_file", n.cfg.PasswordFile, "acl_file", n.cfg.ACLFile}
	if n.security.certs != nil {
		attrs = append(attrs, "tls_cert", n.cfg.TLSCert, "tls_cert_expires", n.security.certs.NotAfter())
	}
	n.log.Info("reloaded certificates and access files", attrs...)
	return nil
}
