package mqttclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/sextantmq/sextant/internal/netx"
)

// Endpoint is a broker address: a transport and where to reach it.
type Endpoint struct {
	Scheme string // "mqtt" (TCP), "mqtts" (TLS), "ws" or "wss"
	Host   string // host:port
	Path   string // WebSocket path
}

// String renders e as a URL.
func (e Endpoint) String() string {
	if e.Scheme == "ws" || e.Scheme == "wss" {
		return e.Scheme + "://" + e.Host + e.Path
	}
	return e.Scheme + "://" + e.Host
}

// transportOf maps a URL scheme to its transport and default port.
func transportOf(s string) (transport, port string, ok bool) {
	switch strings.ToLower(s) {
	case "mqtt", "tcp":
		return "mqtt", "1883", true
	case "mqtts", "ssl", "tls":
		return "mqtts", "8883", true
	case "ws":
		return "ws", "80", true
	case "wss":
		return "wss", "443", true
	}
	return "", "", false
}

// ParseURL parses a broker address: mqtt://host[:port] (also tcp://),
// mqtts://host[:port] (also ssl://, tls://), ws://host[:port][/path],
// wss://host[:port][/path], or a bare host[:port] meaning mqtt://. Ports
// default to 1883, 8883, 80 and 443; the WebSocket path to /mqtt.
func ParseURL(s string) (Endpoint, error) {
	if !strings.Contains(s, "://") {
		s = "mqtt://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w: %q: %w", ErrBadURL, s, err)
	}
	scheme, defPort, ok := transportOf(u.Scheme)
	if !ok {
		return Endpoint{}, fmt.Errorf("%w: %q: unknown scheme %q (use mqtt, mqtts, ws or wss)", ErrBadURL, s, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return Endpoint{}, fmt.Errorf("%w: %q: no host", ErrBadURL, s)
	}
	if strings.Contains(host, ":") {
		if _, err := netip.ParseAddr(host); err != nil {
			return Endpoint{}, fmt.Errorf("%w: %q: bad host %q (write IPv6 addresses in brackets)", ErrBadURL, s, host)
		}
	}
	port := u.Port()
	if port == "" {
		port = defPort
	} else if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return Endpoint{}, fmt.Errorf("%w: %q: bad port %q", ErrBadURL, s, port)
	}
	e := Endpoint{Scheme: scheme, Host: net.JoinHostPort(host, port)}
	if scheme == "ws" || scheme == "wss" {
		e.Path = u.EscapedPath()
		if e.Path == "" || e.Path == "/" {
			e.Path = "/mqtt"
		}
	} else if u.Path != "" && u.Path != "/" {
		return Endpoint{}, fmt.Errorf("%w: %q: a path is meaningful only for ws:// and wss://", ErrBadURL, s)
	}
	return e, nil
}

// DialConn opens the transport connection to e (no MQTT yet). tlsCfg is used
// for mqtts and wss; nil means the system roots and e's host name.
func DialConn(ctx context.Context, e Endpoint, tlsCfg *tls.Config) (net.Conn, error) {
	switch e.Scheme {
	case "mqtt":
		var d net.Dialer
		return d.DialContext(ctx, "tcp", e.Host)
	case "mqtts":
		d := tls.Dialer{Config: tlsConfig(tlsCfg, e.Host)}
		return d.DialContext(ctx, "tcp", e.Host)
	case "ws", "wss":
		opts := &websocket.DialOptions{Subprotocols: []string{"mqtt"}}
		if e.Scheme == "wss" {
			opts.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig(tlsCfg, e.Host)}}
		}
		ws, _, err := websocket.Dial(ctx, e.String(), opts)
		if err != nil {
			return nil, err
		}
		ws.SetReadLimit(-1)
		// The connection's lifetime is the Client's, not the dial's.
		return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
	}
	return nil, fmt.Errorf("%w: unknown scheme %q", ErrBadURL, e.Scheme)
}

func tlsConfig(c *tls.Config, hostport string) *tls.Config {
	if c == nil {
		c = &tls.Config{}
	} else {
		c = c.Clone()
	}
	if c.ServerName == "" && !c.InsecureSkipVerify {
		host, _, _ := net.SplitHostPort(hostport)
		c.ServerName = host
	}
	return c
}

// Dial connects to the broker at addr (see ParseURL) and performs the MQTT
// handshake; ctx bounds both.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	e, err := ParseURL(addr)
	if err != nil {
		return nil, err
	}
	conn, err := DialConn(ctx, e, opts.TLS)
	if err != nil {
		return nil, fmt.Errorf("mqttclient: cannot reach %s: %w", e, err)
	}
	c, err := Connect(ctx, conn, opts)
	var refused *ReasonError
	if err != nil && e.Scheme == "mqtt" && !errors.As(err, &refused) && speaksHTTP(ctx, e.Host) {
		return nil, fmt.Errorf("%w: %s answers HTTP: is it an admin API or web port? MQTT listens on the node's mqtt-addr "+
			"(port 1883 by default); for MQTT over WebSocket give a ws:// URL (%w)", ErrNotMQTT, e.Host, err)
	}
	return c, err
}

// ErrNotMQTT: what answered at the address speaks another protocol.
var ErrNotMQTT = errors.New("mqttclient: not an MQTT server")

// probeTimeout bounds the HTTP probe after a failed handshake.
const probeTimeout = 2 * time.Second

// speaksHTTP reports whether an HTTP server answers at hostport: after a
// failed MQTT handshake, it tells a user who gave an HTTP port why (an HTTP
// server waits for a request line and never answers a CONNECT).
func speaksHTTP(ctx context.Context, hostport string) bool {
	head, err := netx.Probe(context.WithoutCancel(ctx), hostport, probeTimeout, []byte("HEAD / HTTP/1.0\r\n\r\n"), 5)
	return err == nil && string(head) == "HTTP/"
}
