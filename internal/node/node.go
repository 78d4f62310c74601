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
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/listener"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// Options are the process-level inputs that are not configuration.
type Options struct {
	Log     *slog.Logger
	Clock   clock.Clock // nil: the wall clock
	Version string
}

// Node is one running Sextant node.
type Node struct {
	cfg     config.Config
	log     *slog.Logger
	clock   clock.Clock
	version string
	started time.Time

	metrics  *metrics.Broker
	store    *store.Store
	broker   *broker.Broker
	cluster  *clusterParts
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
	if cfg.NodeID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "sextant"
		}
		cfg.NodeID = h
	}
	n := &Node{cfg: cfg, log: opts.Log, clock: opts.Clock, version: opts.Version, metrics: metrics.NewBroker()}
	sec, err := newSecurity(cfg, n.clock, n.metrics, n.log)
	if err != nil {
		return nil, err
	}
	n.security = sec
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	var mode store.FsyncMode
	mode, err = store.ParseFsyncMode(cfg.Fsync)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.store, err = store.Open(filepath.Join(cfg.DataDir, "sextant.db"), store.Options{
		Fsync: mode, SyncInterval: cfg.FsyncInterval, Observer: storeObserver{n.metrics},
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	bcfg := broker.Config{
		Limits:         LimitsFrom(cfg),
		MaxConnections: cfg.MaxConnections,
		SysInterval:    cfg.SysInterval,
		Version:        opts.Version,
	}
	if sec.auth != nil {
		bcfg.Auth = sessionAuth{sec.auth}
	}
	n.broker, err = broker.New(bcfg, n.store, n.clock, n.log, n.metrics)
	if err != nil {
		_ = n.store.Close()
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

type storeObserver struct{ m *metrics.Broker }

var _ store.Observer = storeObserver{}

func (o storeObserver) ObserveCommit(ci store.CommitInfo) {
	o.m.StoreBatchOps.Observe(float64(ci.Ops))
	o.m.StoreCommitSeconds.Observe((ci.Apply + ci.Write).Seconds())
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
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return n.startFailed(fmt.Errorf("node: %s listener: %w", kind, err))
		}
		n.mu.bound[kind] = ln
	}
	n.mu.adminLn = n.mu.bound["admin"]
	if err := n.startCluster(context.Background()); err != nil {
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
		api := adminapi.New(n, n.metrics.Registry, n.log).WithCluster(n).WithClients(clientList{n}).WithDrain(n).WithRemove(n)
		api.SetTokens(n.security.adminToken, n.security.readToken)
		n.mu.adminAPI = api
		n.mu.admin = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
		srv := n.mu.admin
		if n.cfg.AdminTLS {
			ln = tls.NewListener(ln, n.security.certs.AdminConfig())
		}
		go func() {
			if serr := srv.Serve(ln); serr != nil && !errors.Is(serr, http.ErrServerClosed) {
				n.log.Error("admin listener stopped", "err", serr)
			}
		}()
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

// Metrics exposes the node's metric set.
func (n *Node) Metrics() *metrics.Broker { return n.metrics }

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

// Ready implements adminapi.Node.
func (n *Node) Ready() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.mu.shutdown:
		return errors.New("shutting down")
	case !n.mu.ready:
		return errors.New("starting")
	}
	return n.drain.readyErr()
}

// Shutdown stops the node gracefully: stop accepting, disconnect clients
// (DISCONNECT 0x8B to MQTT 5 clients), flush and close the store, then stop
// the admin API. It returns the first error; ctx bounds the wait for clients.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	if n.mu.shutdown {
		n.mu.Unlock()
		return nil
	}
	n.mu.shutdown = true
	n.drain.stopBackground()
	var ls []*listener.Server
	for _, kind := range clientListenerKinds {
		if l := n.mu.listeners[kind]; l != nil {
			ls = append(ls, l)
		}
	}
	admin := n.mu.admin
	n.mu.Unlock()
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	n.leaveCluster()
	errs = append(errs, n.broker.Close(ctx))
	for _, l := range ls {
		errs = append(errs, l.Wait(ctx))
	}
	if n.cluster != nil {
		errs = append(errs, n.closeCluster())
	}
	errs = append(errs, n.store.Close())
	if admin != nil {
		errs = append(errs, admin.Shutdown(ctx))
	}
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
