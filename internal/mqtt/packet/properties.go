package packet

// PropID is an MQTT 5 property identifier.
type PropID byte

const (
	PropPayloadFormat           PropID = 0x01
	PropMessageExpiry           PropID = 0x02
	PropContentType             PropID = 0x03
	PropResponseTopic           PropID = 0x08
	PropCorrelationData         PropID = 0x09
	PropSubscriptionID          PropID = 0x0B
	PropSessionExpiry           PropID = 0x11
	PropAssignedClientID        PropID = 0x12
	PropServerKeepAlive         PropID = 0x13
	PropAuthMethod              PropID = 0x15
	PropAuthData                PropID = 0x16
	PropRequestProblemInfo      PropID = 0x17
	PropWillDelay               PropID = 0x18
	PropRequestResponseInfo     PropID = 0x19
	PropResponseInfo            PropID = 0x1A
	PropServerReference         PropID = 0x1C
	PropReasonString            PropID = 0x1F
	PropReceiveMaximum          PropID = 0x21
	PropTopicAliasMaximum       PropID = 0x22
	PropTopicAlias              PropID = 0x23
	PropMaximumQoS              PropID = 0x24
	PropRetainAvailable         PropID = 0x25
	PropUser                    PropID = 0x26
	PropMaximumPacketSize       PropID = 0x27
	PropWildcardSubAvailable    PropID = 0x28
	PropSubscriptionIDAvailable PropID = 0x29
	PropSharedSubAvailable      PropID = 0x2A
)

// UserProperty is one User Property name/value pair. Order and duplicates are
// preserved, as the specification requires.
type UserProperty struct {
	Key, Value string
}

// Properties holds the MQTT 5 properties of a packet (or of a will). A
// property is on the wire exactly when its bit is set in Present: the decoder
// sets bits for what it read, and the encoder writes what has its bit set, so
// "absent" and "zero" stay distinguishable (an absent Maximum QoS means 2, a
// present one with value 0 means 0). The Set* helpers assign and mark in one
// step. User and SubscriptionIDs are present when non-empty.
//
// Which properties a packet may carry is checked on decode and on encode.
type Properties struct {
	Present PropSet

	PayloadFormat        byte
	MessageExpiry        uint32 // seconds
	ContentType          string
	ResponseTopic        string
	CorrelationData      []byte
	SubscriptionIDs      []uint32 // several in PUBLISH, at most one in SUBSCRIBE
	SessionExpiry        uint32   // seconds
	AssignedClientID     string
	ServerKeepAlive      uint16 // seconds
	AuthMethod           string
	AuthData             []byte
	RequestProblemInfo   byte
	WillDelay            uint32 // seconds
	RequestResponseInfo  byte
	ResponseInfo         string
	ServerReference      string
	ReasonString         string
	ReceiveMaximum       uint16
	TopicAliasMaximum    uint16
	TopicAlias           uint16
	MaximumQoS           byte
	RetainAvailable      byte
	User                 []UserProperty
	MaximumPacketSize    uint32
	WildcardSubAvailable byte
	SubIDAvailable       byte
	SharedSubAvailable   byte
}

// PropSet is a set of property identifiers (bit i is PropID i).
type PropSet uint64

// Has reports whether property id is present.
func (p *Properties) Has(id PropID) bool { return p.Present&(1<<id) != 0 }

// Mark records property id as present.
func (p *Properties) Mark(id PropID) { p.Present |= 1 << id }

// Unmark records property id as absent.
func (p *Properties) Unmark(id PropID) { p.Present &^= 1 << id }

func (p *Properties) SetPayloadFormat(v byte)     { p.PayloadFormat = v; p.Mark(PropPayloadFormat) }
func (p *Properties) SetMessageExpiry(v uint32)   { p.MessageExpiry = v; p.Mark(PropMessageExpiry) }
func (p *Properties) SetContentType(v string)     { p.ContentType = v; p.Mark(PropContentType) }
func (p *Properties) SetResponseTopic(v string)   { p.ResponseTopic = v; p.Mark(PropResponseTopic) }
func (p *Properties) SetCorrelationData(v []byte) { p.CorrelationData = v; p.Mark(PropCorrelationData) }
func (p *Properties) SetSessionExpiry(v uint32)   { p.SessionExpiry = v; p.Mark(PropSessionExpiry) }
func (p *Properties) SetAssignedClientID(v string) {
	p.AssignedClientID = v
	p.Mark(PropAssignedClientID)
}
func (p *Properties) SetServerKeepAlive(v uint16) { p.ServerKeepAlive = v; p.Mark(PropServerKeepAlive) }
func (p *Properties) SetAuthMethod(v string)      { p.AuthMethod = v; p.Mark(PropAuthMethod) }
func (p *Properties) SetAuthData(v []byte)        { p.AuthData = v; p.Mark(PropAuthData) }
func (p *Properties) SetRequestProblemInfo(v byte) {
	p.RequestProblemInfo = v
	p.Mark(PropRequestProblemInfo)
}
func (p *Properties) SetWillDelay(v uint32) { p.WillDelay = v; p.Mark(PropWillDelay) }
func (p *Properties) SetRequestResponseInfo(v byte) {
	p.RequestResponseInfo = v
	p.Mark(PropRequestResponseInfo)
}
func (p *Properties) SetResponseInfo(v string)    { p.ResponseInfo = v; p.Mark(PropResponseInfo) }
func (p *Properties) SetServerReference(v string) { p.ServerReference = v; p.Mark(PropServerReference) }
func (p *Properties) SetReasonString(v string)    { p.ReasonString = v; p.Mark(PropReasonString) }
func (p *Properties) SetReceiveMaximum(v uint16)  { p.ReceiveMaximum = v; p.Mark(PropReceiveMaximum) }
func (p *Properties) SetTopicAliasMaximum(v uint16) {
	p.TopicAliasMaximum = v
	p.Mark(PropTopicAliasMaximum)
}
func (p *Properties) SetTopicAlias(v uint16)    { p.TopicAlias = v; p.Mark(PropTopicAlias) }
func (p *Properties) SetMaximumQoS(v byte)      { p.MaximumQoS = v; p.Mark(PropMaximumQoS) }
func (p *Properties) SetRetainAvailable(v byte) { p.RetainAvailable = v; p.Mark(PropRetainAvailable) }
func (p *Properties) SetMaximumPacketSize(v uint32) {
	p.MaximumPacketSize = v
	p.Mark(PropMaximumPacketSize)
}
func (p *Properties) SetWildcardSubAvailable(v byte) {
	p.WildcardSubAvailable = v
	p.Mark(PropWildcardSubAvailable)
}
func (p *Properties) SetSubIDAvailable(v byte) {
	p.SubIDAvailable = v
	p.Mark(PropSubscriptionIDAvailable)
}
func (p *Properties) SetSharedSubAvailable(v byte) {
	p.SharedSubAvailable = v
	p.Mark(PropSharedSubAvailable)
}
