package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kong"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// The client commands (pub, sub, ping, bench) take -h for the broker host,
// as the mosquitto tools do, while kong reserves -h for help. So kong hands
// everything after the command name to clientArgs unparsed, and each
// command parses it with its own parser, whose help flag is --help alone.
type clientArgs struct {
	Args []string `arg:"" optional:"" passthrough:"" help:"Flags; see --help."`
}

// usageError is an invalid command line: exit status 2.
func usageError(err error) error { return &exitError{code: 2, err: err} }

// parseFlags parses args into target (a flags struct with a Help field).
// It reports done when it printed the help.
func parseFlags(e *env, name, desc string, target any, args []string) (done bool, err error) {
	parser, err := kong.New(target,
		kong.Name("sextant "+name),
		kong.Description(desc),
		kong.NoDefaultHelp(),
		kong.Writers(e.stdout, e.stderr),
		kong.Exit(func(int) {}),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, FlagsLast: true}),
		kong.ValueFormatter(helpValue),
	)
	if err != nil {
		return false, err
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--help" {
			kctx, err := kong.Trace(parser, nil)
			if err != nil {
				return false, err
			}
			return true, kctx.PrintUsage(false)
		}
	}
	if _, err := parser.Parse(args); err != nil {
		return false, usageError(fmt.Errorf("%s: %w", name, withSuggestion(err)))
	}
	return false, nil
}

// connFlags are the broker and connection flags every client command takes.
type connFlags struct {
	Help bool `name:"help" help:"Show this help and exit."`

	Host      string        `short:"h" default:"localhost" group:"Broker" help:"Broker host."`
	Port      int           `short:"p" group:"Broker" placeholder:"PORT" help:"Broker port (default 1883, or 8883 with TLS)."`
	URL       string        `name:"url" group:"Broker" placeholder:"URL" help:"Broker URL instead of -h/-p: mqtt://HOST:PORT, mqtts://HOST:PORT, ws://HOST:PORT/mqtt or wss://..."`
	Version   string        `short:"V" name:"protocol-version" default:"5" group:"Broker" help:"MQTT version: 311 (3.1.1) or 5."`
	Username  string        `short:"u" group:"Broker" placeholder:"NAME" help:"User name."`
	Password  string        `short:"P" group:"Broker" placeholder:"SECRET" help:"Password."`
	TLS       bool          `name:"tls" group:"Broker" help:"Connect with TLS (implied by --cafile and mqtts:// URLs)."`
	CAFile    string        `name:"cafile" type:"path" placeholder:"FILE" group:"Broker" help:"PEM file of CA certificates to trust (TLS)."`
	CertFile  string        `name:"cert" type:"path" placeholder:"FILE" group:"Broker" help:"PEM client certificate (TLS)."`
	KeyFile   string        `name:"key" type:"path" placeholder:"FILE" group:"Broker" help:"PEM client key (TLS)."`
	Insecure  bool          `name:"insecure" group:"Broker" help:"Do not verify the server certificate (TLS)."`
	Timeout   time.Duration `name:"connect-timeout" default:"10s" group:"Broker" help:"Give up connecting after this long."`
	KeepAlive int           `short:"k" name:"keepalive" default:"60" placeholder:"SECONDS" group:"Broker" help:"Keepalive interval in seconds, 0 for none (default ${default})."`
}

// target returns the broker URL the flags name.
func (f *connFlags) target() (string, error) {
	if f.URL != "" {
		if _, err := mqttclient.ParseURL(f.URL); err != nil {
			return "", usageError(err)
		}
		return f.URL, nil
	}
	scheme, port := "mqtt", 1883
	if f.TLS || f.CAFile != "" || f.CertFile != "" {
		scheme, port = "mqtts", 8883
	}
	if f.Port != 0 {
		port = f.Port
	}
	if port <= 0 || port > 65535 {
		return "", usageError(fmt.Errorf("port %d out of range", port))
	}
	if f.Host == "" {
		return "", usageError(errors.New("empty host"))
	}
	return scheme + "://" + net.JoinHostPort(f.Host, strconv.Itoa(port)), nil
}

// parseVersion accepts the spellings of -V.
func parseVersion(s string) (packet.Version, error) {
	switch strings.ToLower(s) {
	case "5", "mqttv5", "v5", "5.0":
		return packet.V5, nil
	case "311", "mqttv311", "v311", "3.1.1", "4":
		return packet.V311, nil
	}
	return 0, usageError(fmt.Errorf("-V %q: want 311 or 5", s))
}

// options builds client options from the flags.
func (f *connFlags) options() (mqttclient.Options, error) {
	v, err := parseVersion(f.Version)
	if err != nil {
		return mqttclient.Options{}, err
	}
	if f.KeepAlive < 0 || f.KeepAlive > 65535 {
		return mqttclient.Options{}, usageError(fmt.Errorf("-k %d: want 0..65535 seconds", f.KeepAlive))
	}
	o := mqttclient.Options{Version: v, KeepAlive: time.Duration(f.KeepAlive) * time.Second, Username: f.Username}
	if f.Password != "" {
		o.Password = []byte(f.Password)
	}
	tc, err := f.tlsConfig()
	if err != nil {
		return o, err
	}
	o.TLS = tc
	return o, nil
}

func (f *connFlags) tlsConfig() (*tls.Config, error) {
	if f.CAFile == "" && f.CertFile == "" && !f.Insecure {
		return nil, nil
	}
	tc := &tls.Config{InsecureSkipVerify: f.Insecure} //nolint:gosec // asked for with --insecure
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, usageError(fmt.Errorf("--cafile: %w", err))
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usageError(fmt.Errorf("--cafile %s: no PEM certificates", f.CAFile))
		}
	}
	if f.CertFile != "" || f.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, usageError(fmt.Errorf("--cert/--key: %w", err))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// dial connects with the connect timeout.
func (f *connFlags) dial(ctx context.Context, o mqttclient.Options) (*mqttclient.Client, error) {
	url, err := f.target()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	c, err := mqttclient.Dial(dctx, url, o)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: no answer within %v: %w", url, f.Timeout, err)
		}
		return nil, err
	}
	return c, nil
}

// sessionFlags are the session and will flags of pub and sub.
type sessionFlags struct {
	ClientID      string `short:"i" name:"id" placeholder:"ID" group:"Session" help:"Client id (default: sextant-<command>-<pid>)."`
	Persistent    bool   `short:"c" name:"disable-clean-session" group:"Session" help:"Keep the session on the broker after disconnecting (with -V 5: session expiry -x, or never)."`
	SessionExpiry int64  `short:"x" name:"session-expiry" default:"-1" placeholder:"SECONDS" group:"Session" help:"MQTT 5 session expiry interval in seconds; -1: none, or never with -c (default ${default})."`

	WillTopic   string `name:"will-topic" placeholder:"TOPIC" group:"Will" help:"Topic of the will message."`
	WillPayload string `name:"will-payload" placeholder:"TEXT" group:"Will" help:"Payload of the will message."`
	WillQoS     int    `name:"will-qos" placeholder:"0|1|2" group:"Will" help:"QoS of the will message."`
	WillRetain  bool   `name:"will-retain" group:"Will" help:"Retain the will message."`
}

func (s *sessionFlags) apply(o *mqttclient.Options, cmd string) error {
	o.ClientID = s.ClientID
	if o.ClientID == "" {
		o.ClientID = fmt.Sprintf("sextant-%s-%d", cmd, os.Getpid())
	}
	o.KeepSession = s.Persistent
	switch {
	case s.SessionExpiry > 0xFFFFFFFF || s.SessionExpiry < -1:
		return usageError(fmt.Errorf("-x %d: want -1..4294967295", s.SessionExpiry))
	case s.SessionExpiry >= 0:
		o.Props.SetSessionExpiry(uint32(s.SessionExpiry))
	case s.Persistent:
		o.Props.SetSessionExpiry(0xFFFFFFFF)
	}
	if s.WillTopic == "" {
		if s.WillPayload != "" || s.WillRetain || s.WillQoS != 0 {
			return usageError(errors.New("--will-payload, --will-qos and --will-retain need --will-topic"))
		}
		return nil
	}
	if s.WillQoS < 0 || s.WillQoS > 2 {
		return usageError(fmt.Errorf("--will-qos %d: want 0, 1 or 2", s.WillQoS))
	}
	o.Will = &mqttclient.Will{Topic: s.WillTopic, Payload: []byte(s.WillPayload), QoS: byte(s.WillQoS), Retain: s.WillRetain}
	return nil
}

// parseUserProps turns KEY=VALUE flags into user properties.
func parseUserProps(kvs []string) ([]packet.UserProperty, error) {
	var out []packet.UserProperty
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageError(fmt.Errorf("--user-property %q: want KEY=VALUE", kv))
		}
		out = append(out, packet.UserProperty{Key: k, Value: v})
	}
	return out, nil
}

func checkQoS(flag string, q int) error {
	if q < 0 || q > 2 {
		return usageError(fmt.Errorf("%s %d: want 0, 1 or 2", flag, q))
	}
	return nil
}

// tracer prints every packet with -d.
func tracer(w io.Writer) func(out bool, p packet.Packet) {
	var mu sync.Mutex
	return func(out bool, p packet.Packet) {
		dir := "recv"
		if out {
			dir = "send"
		}
		mu.Lock()
		fmt.Fprintf(w, "%s %s\n", dir, packet.Describe(p))
		mu.Unlock()
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
