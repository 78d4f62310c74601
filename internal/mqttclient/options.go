package mqttclient

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrClosed: the client was closed by its owner (Close or Disconnect).
	ErrClosed = errors.New("mqttclient: client closed")
	// ErrConnectionLost: the connection ended without the owner asking
	// (network error, broker closed it, keepalive timeout, protocol error).
	ErrConnectionLost = errors.New("mqttclient: connection lost")
	// ErrRefused: the broker refused a CONNECT, a SUBSCRIBE filter or a
	// publish (a reason code of 0x80 or more); see ReasonError.
	ErrRefused = errors.New("mqttclient: refused by the broker")
	// ErrKeepAlive: a PINGREQ went unanswered for a whole keepalive interval.
	ErrKeepAlive = errors.New("mqttclient: keepalive timeout")
	// ErrProtocol: the broker broke the protocol (an unexpected packet, an
	// unknown topic alias, ...).
	ErrProtocol = errors.New("mqttclient: protocol violation by the broker")
	// ErrNotAllowed: the request exceeds what the broker announced it
	// supports (Maximum QoS, Retain Available, Maximum Packet Size).
	ErrNotAllowed = errors.New("mqttclient: not allowed by the broker's limits")
	// ErrBadURL: a broker address that Dial cannot use.
	ErrBadURL = errors.New("mqttclient: bad broker address")
)

// ReasonError is a refusal by the broker: a CONNACK, SUBACK, PUBACK, PUBREC
// or DISCONNECT with an error reason code. It wraps ErrRefused (and
// ErrConnectionLost for a DISCONNECT).
type ReasonError struct {
	Packet packet.Type       // the packet that carried the code
	Code   packet.ReasonCode // MQTT 5 vocabulary (3.1.1 codes are mapped by the codec)
	Reason string            // the Reason String property, if any
	// ServerReference is the Server Reference property of a CONNACK or
	// DISCONNECT (a redirect), if any.
	ServerReference string
}

func (e *ReasonError) Error() string {
	s := fmt.Sprintf("%s: %s", e.Packet, e.Code) // the code's String has its number
	if e.Reason != "" && !strings.HasPrefix(e.Code.String(), e.Reason+" (") {
		s += ": " + e.Reason
	}
	if e.ServerReference != "" {
		s += " (server reference " + e.ServerReference + ")"
	}
	return s
}

func (e *ReasonError) Unwrap() []error {
	if e.Packet == packet.DISCONNECT {
		return []error{ErrRefused, ErrConnectionLost}
	}
	return []error{ErrRefused}
}

// Will is the message the broker publishes on the client's behalf when the
// connection ends without a DISCONNECT.
type Will struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
	Props   packet.Properties // MQTT 5 will properties (delay, expiry, user properties, ...)
}

// Handler receives an inbound PUBLISH on the reader goroutine. p and every
// byte slice in it are valid only until Handler returns (they alias the read
// buffer); copy what you keep. A topic alias has already been resolved into
// p.Topic. At QoS 1 and 2 the acknowledgement is sent after Handler returns.
type Handler func(p *packet.Publish)

// Options configure a Client. The zero value is a clean MQTT 5 session with
// no keepalive, a broker-assigned client id and no handler.
type Options struct {
	// Version is the protocol version: packet.V311 or packet.V5 (0 means V5).
	Version packet.Version
	// ClientID; empty lets the broker assign one (MQTT 5 tells us which, see
	// Client.Server). A 3.1.1 client with an empty id must not keep a session.
	ClientID string
	// KeepSession asks the broker to resume the session (Clean Start /
	// Clean Session cleared). For MQTT 5 the session outlives the connection
	// only if Props carries a Session Expiry Interval.
	KeepSession bool
	// KeepAlive is the keepalive interval; 0 turns keepalive off. The broker
	// may override it (MQTT 5 Server Keep Alive). Rounded to whole seconds.
	KeepAlive time.Duration
	// Username is sent when UsernameSet or Username != "".
	Username    string
	UsernameSet bool
	// Password is sent when non-nil.
	Password []byte
	// Will, when non-nil, is the connection's will message.
	Will *Will
	// Props are the MQTT 5 CONNECT properties (Session Expiry, Receive
	// Maximum, Maximum Packet Size, Topic Alias Maximum, User Properties,
	// Request Problem/Response Information, ...). Ignored for 3.1.1.
	// A Topic Alias Maximum here lets the broker send aliases, which the
	// client resolves; a Maximum Packet Size bounds what it reads.
	Props packet.Properties

	// MaxInflight caps the QoS 1 and 2 publishes awaiting acknowledgement;
	// the window is the smaller of it and the broker's Receive Maximum.
	// 0 means the broker's Receive Maximum (65535 for 3.1.1).
	MaxInflight int
	// TopicAliases makes outbound publishes use topic aliases when the
	// broker allows them (MQTT 5): the first publish to a topic carries the
	// name and an alias, later ones only the alias.
	TopicAliases bool
	// MaxPending bounds the encoded bytes waiting for the writer before a
	// publish blocks; 0 means 256 KiB.
	MaxPending int

	// OnPublish receives inbound messages; nil discards them (after
	// acknowledging them).
	OnPublish Handler
	// Trace, when non-nil, sees every packet sent (out true) and received,
	// on the goroutine that sends or receives it. For debugging output;
	// the same validity rule as Handler applies.
	Trace func(out bool, p packet.Packet)

	// Clock is the source of time for keepalive; nil means the real clock.
	Clock clock.Clock

	// TLS configures mqtts:// and wss:// connections made by Dial; nil means
	// the system roots and the URL's host name.
	TLS *tls.Config
}

const (
	defaultMaxPending = 256 << 10
	maxPacketID       = 65535
)

func (o *Options) version() packet.Version {
	if o.Version == 0 {
		return packet.V5
	}
	return o.Version
}

// validate checks the options that the codec cannot.
func (o *Options) validate() error {
	switch o.version() {
	case packet.V311, packet.V5:
	default:
		return fmt.Errorf("mqttclient: unsupported protocol version %d (use 3.1.1 or 5)", o.Version)
	}
	if o.KeepAlive < 0 || o.KeepAlive > 65535*time.Second {
		return fmt.Errorf("mqttclient: keepalive %v out of range (0..65535s)", o.KeepAlive)
	}
	if o.MaxInflight < 0 || o.MaxPending < 0 {
		return errors.New("mqttclient: negative MaxInflight or MaxPending")
	}
	if o.version() == packet.V311 && o.ClientID == "" && o.KeepSession {
		return errors.New("mqttclient: MQTT 3.1.1 needs a client id to keep a session")
	}
	if o.Will != nil && o.Will.QoS > 2 {
		return fmt.Errorf("mqttclient: will QoS %d", o.Will.QoS)
	}
	return nil
}

// connectPacket builds the CONNECT for o.
func (o *Options) connectPacket() *packet.Connect {
	v := o.version()
	c := &packet.Connect{
		Version:    v,
		CleanStart: !o.KeepSession,
		KeepAlive:  uint16((o.KeepAlive + time.Second/2) / time.Second),
		ClientID:   o.ClientID,
	}
	if o.KeepAlive > 0 && c.KeepAlive == 0 {
		c.KeepAlive = 1
	}
	if v == packet.V5 {
		c.Props = o.Props
	}
	if w := o.Will; w != nil {
		c.WillFlag, c.WillTopic, c.WillPayload, c.WillQoS, c.WillRetain = true, w.Topic, w.Payload, w.QoS, w.Retain
		if v == packet.V5 {
			c.WillProps = w.Props
		}
	}
	if o.UsernameSet || o.Username != "" {
		c.UsernameFlag, c.Username = true, o.Username
	}
	if o.Password != nil {
		c.PasswordFlag, c.Password = true, o.Password
	}
	return c
}

// ServerInfo is what the CONNACK said about the session and the broker's
// limits, with the specification's defaults filled in for absent properties.
type ServerInfo struct {
	SessionPresent    bool
	AssignedClientID  string        // MQTT 5: the id the broker chose, if we sent none
	KeepAlive         time.Duration // in effect (Server Keep Alive overrides ours)
	ReceiveMaximum    uint16        // 65535 when absent
	MaximumQoS        byte          // 2 when absent
	RetainAvailable   bool          // true when absent
	MaximumPacketSize uint32        // 0: no limit announced
	TopicAliasMaximum uint16        // 0: no aliases from us
	WildcardSubs      bool          // true when absent
	SharedSubs        bool          // true when absent
	SubIDs            bool          // true when absent
	User              []packet.UserProperty
}

func serverInfo(ack *packet.Connack, keepAlive time.Duration) ServerInfo {
	p := &ack.Props
	si := ServerInfo{
		SessionPresent: ack.SessionPresent, KeepAlive: keepAlive,
		ReceiveMaximum: 65535, MaximumQoS: 2, RetainAvailable: true,
		WildcardSubs: true, SharedSubs: true, SubIDs: true,
		AssignedClientID: p.AssignedClientID,
	}
	if p.Has(packet.PropServerKeepAlive) {
		si.KeepAlive = time.Duration(p.ServerKeepAlive) * time.Second
	}
	if p.Has(packet.PropReceiveMaximum) && p.ReceiveMaximum > 0 {
		si.ReceiveMaximum = p.ReceiveMaximum
	}
	if p.Has(packet.PropMaximumQoS) {
		si.MaximumQoS = p.MaximumQoS
	}
	if p.Has(packet.PropRetainAvailable) {
		si.RetainAvailable = p.RetainAvailable == 1
	}
	if p.Has(packet.PropMaximumPacketSize) {
		si.MaximumPacketSize = p.MaximumPacketSize
	}
	si.TopicAliasMaximum = p.TopicAliasMaximum
	if p.Has(packet.PropWildcardSubAvailable) {
		si.WildcardSubs = p.WildcardSubAvailable == 1
	}
	if p.Has(packet.PropSharedSubAvailable) {
		si.SharedSubs = p.SharedSubAvailable == 1
	}
	if p.Has(packet.PropSubscriptionIDAvailable) {
		si.SubIDs = p.SubIDAvailable == 1
	}
	si.User = append([]packet.UserProperty(nil), p.User...)
	return si
}
