package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/netx"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("peer: invalid config")

// Handler receives what peers send. Link calls come from links' reader
// goroutines, one at a time per link and per origin, and in the order the
// origin sent them; a call that blocks holds up that link (and, through
// TCP flow control, the peer's outbox for it). Serve runs in its own
// goroutine.
type Handler interface {
	// LinkUp is called when a connection to l's node is established, before
	// anything is read from it. The handler may call l.SyncRetained.
	LinkUp(l *Link)
	// LinkDown is called when that connection has ended.
	LinkDown(node string)
	// Interest reports the node's interest: with full set, add is its whole
	// set and replaces what it announced before; otherwise add and remove
	// are changes.
	Interest(node string, full bool, add, remove []string)
	// Publish delivers one forwarded message from node, its origin (which
	// may have sent it through a transit node). msg is a message.Append
	// encoding valid only during the call. Once it returns, the message
	// counts as delivered: it is acknowledged to its origin.
	Publish(node string, msg []byte, direct bool, groups []string)
	// Retained applies one retained update from node (msg as in Publish).
	Retained(node string, msg []byte)
	// Serve answers a request (Link.Call) or a notification (Link.Notify,
	// whose answer is discarded). body is the caller's and may be kept. ctx
	// ends when the manager closes.
	Serve(ctx context.Context, node string, method byte, body []byte) ([]byte, error)
}

// Options tune links. The zero value of each field takes the default named
// in its comment.
type Options struct {
	// QueueMessages bounds a peer's outbox: the forwarded messages waiting
	// to be sent plus the QoS 1/2 ones sent and not yet acknowledged
	// (default 16384). It also caps the QoS 1/2 messages in flight to the
	// peer, so a stream's rate is at most QueueMessages per round trip.
	QueueMessages int
	// QueueBytes bounds their size (default 16 MiB).
	QueueBytes int
	// ControlBytes bounds the control frames (interest is not queued;
	// retained updates, requests and responses are) waiting per connection;
	// overflowing it resets the connection, and the reconnection
	// resynchronises interest and retained messages (default 16 MiB).
	ControlBytes int
	// BlockTimeout is how long a QoS 1/2 publisher waits for room in a full
	// queue of a connected link before its message is dropped (default 1 s).
	BlockTimeout time.Duration
	// BatchBytes is about how many bytes of forwarded messages go into one
	// frame and one write (default 256 KiB).
	BatchBytes int
	// MaxFrame bounds a frame's size (default 64 MiB); a peer that sends a
	// larger one is disconnected. A session hand-over must fit in one frame.
	MaxFrame int
	// PingInterval: a connection with nothing to send sends a ping this often
	// (default 1 s).
	PingInterval time.Duration
	// StallTimeout: a link from which nothing arrived for this long is not
	// used (the peer's messages go through a transit node, and this node
	// tells its peers it does not hear that one) until something arrives,
	// though its connection stays open until ReadTimeout (default 3 s; keep
	// it above twice PingInterval).
	StallTimeout time.Duration
	// ResendAfter: on a transit path, QoS 1/2 messages sent and not
	// acknowledged for this long, with no acknowledgement progress, are sent
	// again (default 2 s). On the direct link they are sent again on every
	// new connection instead.
	ResendAfter time.Duration
	// TransitWindow bounds the bytes of QoS 1/2 messages sent to a peer
	// through a transit node and not yet acknowledged (default 1 MiB; keep
	// it below TransitBytes): an origin does not send faster than the
	// transit node passes its frames on, so the transit queue rarely
	// overflows and a resend stays small.
	TransitWindow int
	// AckDelay: a receiver holds an acknowledgement up to this long for
	// more messages to go with it, or for a frame going to the origin anyway
	// to carry it (default 5 ms); it sends one at once when a quarter of
	// QueueMessages are unacknowledged. Acknowledgements only release the
	// sender's outbox: the delay costs memory, not latency.
	AckDelay time.Duration
	// TransitBytes bounds the frames waiting on a connection that pass
	// through this node between two others, and this node's retained
	// updates sent through a transit node; beyond it they are dropped and
	// counted (the origin sends its messages again; default 4 MiB).
	TransitBytes int
	// ReadTimeout: a connection that receives nothing for this long is
	// closed (default 10 s; keep it several PingIntervals).
	ReadTimeout time.Duration
	// WriteTimeout bounds one write (default 10 s).
	WriteTimeout time.Duration
	// HandshakeTimeout bounds dialling and the handshake (default 5 s).
	HandshakeTimeout time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential wait between
	// dial attempts (defaults 50 ms and 5 s).
	BackoffMin, BackoffMax time.Duration
	// MaxRequests bounds the requests served at once; beyond it a request is
	// answered with an error at once (default 256).
	MaxRequests int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.QueueMessages, 16384)
	def(&o.QueueBytes, 16<<20)
	def(&o.ControlBytes, 16<<20)
	def(&o.BatchBytes, 256<<10)
	def(&o.MaxFrame, 64<<20)
	def(&o.MaxRequests, 256)
	def(&o.TransitBytes, 4<<20)
	def(&o.TransitWindow, 1<<20)
	dur(&o.BlockTimeout, time.Second)
	dur(&o.PingInterval, time.Second)
	dur(&o.StallTimeout, 3*time.Second)
	dur(&o.ResendAfter, 2*time.Second)
	dur(&o.AckDelay, 5*time.Millisecond)
	dur(&o.ReadTimeout, 10*time.Second)
	dur(&o.WriteTimeout, 10*time.Second)
	dur(&o.HandshakeTimeout, 5*time.Second)
	dur(&o.BackoffMin, 50*time.Millisecond)
	dur(&o.BackoffMax, 5*time.Second)
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = o.BackoffMin
	}
	return o
}

// ackEvery is how many unacknowledged messages make a receiver
// acknowledge at once.
func (o *Options) ackEvery() int { return max(o.QueueMessages/4, 1) }

// Config configures a Manager.
type Config struct {
	// NodeID is this node's id. Between two nodes, the one with the smaller
	// id dials.
	NodeID string
	// Listener accepts peers' connections (each starting with the Kind
	// byte); the Manager owns it from Start on. nil: this node only dials.
	Listener net.Listener
	// Dial opens connections to peers (netx.DialTCP in production).
	Dial netx.DialFunc
	// TLS, when set, wraps every peer connection after the Kind byte: as
	// the server side on accepted connections (set ClientAuth to
	// tls.RequireAndVerifyClientCert for mutual TLS) and as the client side
	// on dialled ones (ServerName defaults to the dialled host).
	TLS *tls.Config
	// Handler receives what peers send.
	Handler Handler
	// Clock drives timers and deadlines (default: the wall clock).
	Clock clock.Clock
	// Seed seeds the reconnection jitter (0: 1).
	Seed uint64
	// Registerer receives the link metrics (nil: not exported).
	Registerer prometheus.Registerer
	// Log receives connection events (default: discarded).
	Log *slog.Logger
	// Estimate estimates the round trip between two nodes (network
	// coordinates: membership.EstimateRTT); it ranks transit nodes. nil, or
	// ok false: unknown, ranked after every known estimate.
	Estimate func(a, b string) (rtt time.Duration, ok bool)
	// Options tune the links.
	Options Options
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return fmt.Errorf("%w: no node id", ErrConfig)
	case c.Dial == nil:
		return fmt.Errorf("%w: no dial function", ErrConfig)
	case c.Handler == nil:
		return fmt.Errorf("%w: no handler", ErrConfig)
	}
	return nil
}
