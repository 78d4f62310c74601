package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/run"
)

// Handler serves one client connection. It owns the connection and closes
// it.
type Handler interface {
	ServeConn(c net.Conn)
}

// A Handler may return before the connection ends when it hands the
// connection to a goroutine of its own (the broker does, after the MQTT
// handshake); Wait then covers only the hand-off.

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(net.Conn)

func (f HandlerFunc) ServeConn(c net.Conn) { f(c) }

// wsReadHeaderTimeout bounds reading a WebSocket upgrade request's headers.
const wsReadHeaderTimeout = 10 * time.Second

// Options are a listener's optional layers.
type Options struct {
	// TLS, if set, makes the listener serve TLS (MQTT over TLS, or secure
	// WebSocket). Use Certificates.MQTTConfig to follow reloads.
	TLS *tls.Config
	// Limiter, if set, applies per-address limits to accepted connections;
	// share one between listeners to count an address across all of them.
	Limiter *IPLimiter
}

// Server is one running listener.
type Server struct {
	ln   net.Listener
	h    Handler
	log  *slog.Logger
	kind string
	tls  *tls.Config
	http *http.Server // WebSocket only

	conns sync.WaitGroup // connection goroutines
	loop  *run.Group     // the accept loop (or the WebSocket server); stopped by Close
}

func wrap(ln net.Listener, opts Options) net.Listener {
	if opts.Limiter != nil {
		ln = limitListener{Listener: ln, l: opts.Limiter}
	}
	return ln
}

// ServeTCP accepts MQTT connections on ln until Close: plain TCP, or TLS
// when opts.TLS is set (the handshake runs on the connection's first read,
// under the session's CONNECT timeout).
func ServeTCP(ln net.Listener, h Handler, log *slog.Logger, opts Options) *Server {
	kind := "tcp"
	if opts.TLS != nil {
		kind = "tls"
	}
	s := &Server{ln: wrap(ln, opts), h: h, log: log.With("listener", kind, "addr", ln.Addr().String()), kind: kind, tls: opts.TLS,
		loop: run.NewGroup(context.Background())}
	s.loop.Go(s.acceptLoop)
	return s
}

// connKey carries the accepted net.Conn into a WebSocket request's context.
type connKey struct{}

// ServeWebSocket accepts MQTT-over-WebSocket connections on ln at path /mqtt
// until Close, over TLS (wss://) when opts.TLS is set. Clients should offer
// the "mqtt" subprotocol; clients that offer none are accepted too, as many
// browser libraries omit it.
func ServeWebSocket(ln net.Listener, h Handler, log *slog.Logger, opts Options) *Server {
	kind := "ws"
	if opts.TLS != nil {
		kind = "wss"
	}
	inner := wrap(ln, opts)
	s := &Server{ln: inner, h: h, log: log.With("listener", kind, "addr", ln.Addr().String()), kind: kind, tls: opts.TLS,
		loop: run.NewGroup(context.Background())}
	if opts.TLS != nil {
		inner = tls.NewListener(inner, opts.TLS)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mqtt", s.serveWS)
	s.http = &http.Server{
		Handler: mux, ReadHeaderTimeout: wsReadHeaderTimeout,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
	s.loop.Go(func(context.Context) {
		if err := s.http.Serve(inner); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("websocket listener stopped", "err", err)
		}
	})
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

func (s *Server) acceptLoop(ctx context.Context) {
	netx.Accept(ctx, s.ln, nil, s.log, func(c net.Conn) bool {
		setNoDelay(c)
		if s.tls != nil {
			c = tls.Server(c, s.tls)
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			s.h.ServeConn(c)
		}()
		return true
	})
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	wc, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       []string{"mqtt"},
		InsecureSkipVerify: true, // MQTT clients are not browsers bound by origin policy; authentication is MQTT's
	})
	if err != nil {
		s.log.Debug("websocket handshake failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	wc.SetReadLimit(-1) // MQTT enforces its own maximum packet size
	s.conns.Add(1)
	defer s.conns.Done()
	nc := websocket.NetConn(context.Background(), wc, websocket.MessageBinary)
	wsc := &wsConn{Conn: nc, remote: remoteAddr(r.RemoteAddr), tls: r.TLS}
	if under, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		wsc.under = under
	}
	s.h.ServeConn(wsc)
}

// wsConn is an MQTT connection carried by a WebSocket. It reports the
// client's address instead of the WebSocket library's placeholder, the TLS
// state of a wss:// connection, and (NetConn) the accepted connection.
type wsConn struct {
	net.Conn
	remote net.Addr
	tls    *tls.ConnectionState // nil: plain ws://
	under  net.Conn             // the connection the HTTP server accepted
}

func (c *wsConn) RemoteAddr() net.Addr { return c.remote }

// ConnectionState is the TLS state of a wss:// connection (zero for ws://).
func (c *wsConn) ConnectionState() tls.ConnectionState {
	if c.tls == nil {
		return tls.ConnectionState{}
	}
	return *c.tls
}

// NetConn returns the connection the HTTP server accepted (TLS or TCP),
// for callers that look for a layer underneath, or the WebSocket stream.
func (c *wsConn) NetConn() net.Conn {
	if c.under != nil {
		return c.under
	}
	return c.Conn
}

func remoteAddr(s string) net.Addr {
	if a, err := net.ResolveTCPAddr("tcp", s); err == nil {
		return a
	}
	return &net.TCPAddr{}
}

// Close stops accepting new connections. Connections already handed to the
// Handler are left running; Wait waits for them.
func (s *Server) Close() error {
	s.loop.Stop()
	var err error
	if s.http != nil {
		err = s.http.Close()
	} else {
		err = s.ln.Close()
	}
	s.loop.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Wait blocks until every Handler call has returned or ctx is done.
func (s *Server) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
