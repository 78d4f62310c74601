package session

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"time"

	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/topic"
)

// Credentials are what a connecting client presents: its CONNECT's user
// name and password, and the verified certificate of a TLS connection.
type Credentials struct {
	ClientID    string
	Username    string
	HasUsername bool
	Password    []byte
	HasPassword bool
	Cert        *x509.Certificate // nil without a verified client certificate
	Remote      net.Addr
}

// Identity is who a connection authenticated as, and what it may do.
type Identity struct {
	User   string     // "" for an anonymous client
	Rights Authorizer // nil: no access control
}

// Authenticator decides whether a client may connect.
type Authenticator interface {
	// Authenticate returns the client's identity, or the CONNACK reason
	// code refusing it (0x86 bad user name or password, 0x87 not
	// authorized) with a reason string.
	Authenticate(cr *Credentials) (id Identity, code packet.ReasonCode, reason string)
	// Unidentified returns the rights (nil: no access control) of a
	// session whose client's identity is not known: one restored from the
	// store after a restart whose client has not connected since. Its will
	// is checked against them.
	Unidentified(clientID string) Authorizer
}

// Authorizer is one client's rights. A nil Authorizer means no access
// control: every topic is open except those under $SYS/, which clients may
// neither publish to nor subscribe to.
type Authorizer interface {
	CanPublish(topic string) bool
	CanSubscribe(filter string) bool // shared subscriptions by their inner filter
	CanReceive(topic string) bool    // a message about to be delivered
}

// SysRefusal is the reason string of a SUBACK that refuses a $SYS/
// filter: how to open $SYS/ to the client.
const SysRefusal = "$SYS/ is not readable by this client: without an acl-file the node's sys-access setting decides " +
	"(loopback: clients on the node's host; all: every client); with one, a rule must allow subscribe on $SYS/#"

// Actions counted in sextant_access_denied_total.
const (
	deniedPublish   = "publish"
	deniedSubscribe = "subscribe"
	deniedReceive   = "receive"
	deniedWill      = "will"
)

func mayPublish(r Authorizer, name string) bool {
	if r == nil {
		return name == "" || name[0] != '$' || !topic.IsSys(name)
	}
	return r.CanPublish(name)
}

func maySubscribe(r Authorizer, filter string) bool {
	if r == nil {
		_, inner, _, err := topic.ParseShared(filter)
		return err == nil && !topic.IsSys(inner)
	}
	return r.CanSubscribe(filter)
}

// MayPublishWill reports whether a will on topic may be published now for
// session s, with the rights of its latest connection (or, with s nil or
// never connected since a restart, those Env.Auth gives an unidentified
// session of clientID). A refusal is counted.
func (e *Env) MayPublishWill(s *Session, clientID, topic string) bool {
	var r Authorizer
	identified := false
	if s != nil {
		s.mu.Lock()
		r, identified = s.mu.rights, s.mu.identified
		s.mu.Unlock()
	}
	if !identified && e.Auth != nil {
		r = e.Auth.Unidentified(clientID)
	}
	if mayPublish(r, topic) {
		return true
	}
	e.Metrics.AccessDenied.WithLabelValues(deniedWill).Inc()
	return false
}

// ClaimedByOther reports whether s belongs to a different user than the one
// c authenticated as: the session was last used, since the node started, by
// a connection of another identity. A client identifier cannot be taken
// over across users while the node remembers its owner.
func (s *Session) ClaimedByOther(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.identified && s.mu.user != c.id.User
}

// peerCert returns the verified client certificate of a TLS connection.
func peerCert(nc net.Conn) *x509.Certificate {
	cs, ok := nc.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return nil
	}
	st := cs.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return nil
	}
	return st.VerifiedChains[0][0]
}

// connectRateExceeded reports whether the listener marked the connection
// (or one it wraps) as over its address's connection rate.
func connectRateExceeded(nc net.Conn) bool {
	for range 4 {
		if r, ok := nc.(interface{ ConnectRateExceeded() bool }); ok {
			return r.ConnectRateExceeded()
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		nc = u.NetConn()
	}
	return false
}

// authenticate runs the CONNECT through Env.Auth; on refusal it waits the
// failed-authentication delay, sends the refusal and reports false.
func (c *Conn) authenticate(cp *packet.Connect, refuse func(packet.ReasonCode, string) bool) bool {
	a := c.env.Auth
	if a == nil {
		return true
	}
	cr := Credentials{
		ClientID: cp.ClientID, Username: cp.Username, HasUsername: cp.UsernameFlag,
		Password: cp.Password, HasPassword: cp.PasswordFlag, Cert: peerCert(c.nc), Remote: c.nc.RemoteAddr(),
	}
	id, code, reason := a.Authenticate(&cr)
	if code == packet.Success {
		c.id = id
		return true
	}
	c.logger().Debug("authentication failed", "client", cp.ClientID, "user", cp.Username, "code", code, "reason", reason)
	if d := c.env.Limits.AuthFailDelay; d > 0 {
		c.env.Metrics.LimitsHit.WithLabelValues(metrics.LimitAuthFailDelay).Inc()
		t := c.env.Clock.NewTimer(d)
		<-t.C()
	}
	return refuse(code, reason)
}

// bucket is a token bucket that may go into debt: take always takes, and
// reports how long until the balance is back to zero.
type bucket struct {
	rate, burst, tokens float64 // rate 0: unlimited
	last                time.Time
}

func newBucket(rate, burst float64, now time.Time) bucket {
	return bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *bucket) take(now time.Time, n float64) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(b.burst, b.tokens+b.rate*dt.Seconds())
		b.last = now
	}
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// throttle applies the client's publish rate and bytes limits to one
// PUBLISH of n bytes: it pauses the reader until the client is back under
// them, or returns the error that disconnects it.
func (c *Conn) throttle(n int) error {
	now := c.env.Clock.Now()
	wm := c.pubMsgs.take(now, 1)
	wb := c.pubBytes.take(now, float64(n))
	if wm == 0 && wb == 0 {
		return nil
	}
	limit, code, reason := metrics.LimitPublishRate, packet.MessageRateTooHigh, "publish rate limit exceeded"
	if wb > wm {
		limit, code, reason = metrics.LimitPublishBytes, packet.QuotaExceeded, "publish bytes limit exceeded"
	}
	c.env.Metrics.LimitsHit.WithLabelValues(limit).Inc()
	if c.env.Limits.PublishDisconnect {
		c.logger().Info("disconnecting client over its publish limit", "limit", limit)
		return &handlerError{code: code, reason: reason, limit: true}
	}
	return c.pause(max(wm, wb))
}

// pause stops reading for d (the client's bytes wait in the socket, which
// back-pressures it) or until the connection is closing.
func (c *Conn) pause(d time.Duration) error {
	t := c.env.Clock.NewTimer(d)
	defer t.Stop()
	s := c.s
	for {
		s.mu.Lock()
		if c.w.gone || c.w.closing {
			s.mu.Unlock()
			return errClosing
		}
		if c.w.space == nil {
			c.w.space = make(chan struct{})
		}
		ch := c.w.space
		s.mu.Unlock()
		c.rb.flush()
		select {
		case <-t.C():
			return nil
		case <-ch: // closing, or the writer made room: look again
		}
	}
}
