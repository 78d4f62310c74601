package packet

// Type is an MQTT control packet type (the high nibble of the first byte).
type Type byte

const (
	CONNECT     Type = 1
	CONNACK     Type = 2
	PUBLISH     Type = 3
	PUBACK      Type = 4
	PUBREC      Type = 5
	PUBREL      Type = 6
	PUBCOMP     Type = 7
	SUBSCRIBE   Type = 8
	SUBACK      Type = 9
	UNSUBSCRIBE Type = 10
	UNSUBACK    Type = 11
	PINGREQ     Type = 12
	PINGRESP    Type = 13
	DISCONNECT  Type = 14
	AUTH        Type = 15 // MQTT 5 only
)

// Version is the protocol level byte of CONNECT.
type Version byte

const (
	V31  Version = 3 // MQTT 3.1 (accepted on decode as 3.1.1 semantics where it is a subset)
	V311 Version = 4
	V5   Version = 5
)

// Packet is any control packet.
type Packet interface {
	Type() Type
	// Append appends the packet's wire encoding for protocol version v to dst.
	// It fails with an error wrapping ErrMalformed or ErrProtocol when the
	// packet cannot be encoded validly (for example a QoS 0 PUBLISH with a
	// packet id, or a property not allowed for v).
	Append(dst []byte, v Version) ([]byte, error)
}

// Connect is CONNECT. The will fields are meaningful only when WillFlag is set.
type Connect struct {
	ProtocolName string  // "MQTT" (3.1.1, 5) or "MQIsdp" (3.1)
	Version      Version // protocol level
	CleanStart   bool    // Clean Start (5) / Clean Session (3.1.1)
	KeepAlive    uint16  // seconds
	Props        Properties

	ClientID string

	WillFlag    bool
	WillQoS     byte
	WillRetain  bool
	WillProps   Properties
	WillTopic   string
	WillPayload []byte

	UsernameFlag bool
	Username     string
	PasswordFlag bool
	Password     []byte
}

// Connack is CONNACK. ReasonCode is an MQTT 5 code; see the package doc.
type Connack struct {
	SessionPresent bool
	ReasonCode     ReasonCode
	Props          Properties
}

// Publish is PUBLISH. PacketID is present only for QoS 1 and 2.
type Publish struct {
	Dup      bool
	QoS      byte
	Retain   bool
	Topic    string // may be empty in MQTT 5 when Props carries a Topic Alias
	PacketID uint16
	Props    Properties
	Payload  []byte
}

// Ack is PUBACK, PUBREC, PUBREL or PUBCOMP, distinguished by Kind. In MQTT 5
// the reason code and properties may be omitted on the wire when the code is
// Success and there are no properties; the encoder does so.
type Ack struct {
	Kind       Type // PUBACK, PUBREC, PUBREL or PUBCOMP
	PacketID   uint16
	ReasonCode ReasonCode
	Props      Properties
}

// Subscription is one topic filter of a SUBSCRIBE with its options.
type Subscription struct {
	Filter            string
	QoS               byte
	NoLocal           bool // MQTT 5
	RetainAsPublished bool // MQTT 5
	RetainHandling    byte // MQTT 5: 0, 1 or 2
}

// Subscribe is SUBSCRIBE.
type Subscribe struct {
	PacketID uint16
	Props    Properties
	Subs     []Subscription
}

// Suback is SUBACK: one reason code per requested subscription.
type Suback struct {
	PacketID uint16
	Props    Properties
	Codes    []ReasonCode
}

// Unsubscribe is UNSUBSCRIBE.
type Unsubscribe struct {
	PacketID uint16
	Props    Properties
	Filters  []string
}

// Unsuback is UNSUBACK. In 3.1.1 it carries no reason codes.
type Unsuback struct {
	PacketID uint16
	Props    Properties
	Codes    []ReasonCode
}

// Pingreq is PINGREQ.
type Pingreq struct{}

// Pingresp is PINGRESP.
type Pingresp struct{}

// Disconnect is DISCONNECT. In 3.1.1 it has no variable header.
type Disconnect struct {
	ReasonCode ReasonCode
	Props      Properties
}

// Auth is AUTH (MQTT 5 only).
type Auth struct {
	ReasonCode ReasonCode
	Props      Properties
}

func (*Connect) Type() Type     { return CONNECT }
func (*Connack) Type() Type     { return CONNACK }
func (*Publish) Type() Type     { return PUBLISH }
func (a *Ack) Type() Type       { return a.Kind }
func (*Subscribe) Type() Type   { return SUBSCRIBE }
func (*Suback) Type() Type      { return SUBACK }
func (*Unsubscribe) Type() Type { return UNSUBSCRIBE }
func (*Unsuback) Type() Type    { return UNSUBACK }
func (*Pingreq) Type() Type     { return PINGREQ }
func (*Pingresp) Type() Type    { return PINGRESP }
func (*Disconnect) Type() Type  { return DISCONNECT }
func (*Auth) Type() Type        { return AUTH }
