package packet

import "math/bits"

// A property context is where a property set appears: a packet type, or the
// will properties of CONNECT. Contexts are bits so that the allowed-in table
// below is one mask per property.
type propCtx uint16

const ctxWill propCtx = 1 // bit 0: the Will Properties of CONNECT

func ctxOf(t Type) propCtx { return 1 << t }

const (
	cConnect    = propCtx(1) << CONNECT
	cConnack    = propCtx(1) << CONNACK
	cPublish    = propCtx(1) << PUBLISH
	cPuback     = propCtx(1) << PUBACK
	cPubrec     = propCtx(1) << PUBREC
	cPubrel     = propCtx(1) << PUBREL
	cPubcomp    = propCtx(1) << PUBCOMP
	cSubscribe  = propCtx(1) << SUBSCRIBE
	cSuback     = propCtx(1) << SUBACK
	cUnsub      = propCtx(1) << UNSUBSCRIBE
	cUnsuback   = propCtx(1) << UNSUBACK
	cDisconnect = propCtx(1) << DISCONNECT
	cAuth       = propCtx(1) << AUTH
	cAcks       = cPuback | cPubrec | cPubrel | cPubcomp
)

// allowedIn returns the contexts a property may appear in (MQTT 5 §2.2.2.2,
// Table 2-4); zero means the identifier is unknown.
func allowedIn(id PropID) propCtx {
	switch id {
	case PropPayloadFormat, PropMessageExpiry, PropContentType, PropResponseTopic, PropCorrelationData:
		return cPublish | ctxWill
	case PropSubscriptionID:
		return cPublish | cSubscribe
	case PropSessionExpiry:
		return cConnect | cConnack | cDisconnect
	case PropAssignedClientID, PropServerKeepAlive, PropResponseInfo, PropMaximumQoS, PropRetainAvailable,
		PropWildcardSubAvailable, PropSubscriptionIDAvailable, PropSharedSubAvailable:
		return cConnack
	case PropAuthMethod, PropAuthData:
		return cConnect | cConnack | cAuth
	case PropRequestProblemInfo, PropRequestResponseInfo:
		return cConnect
	case PropWillDelay:
		return ctxWill
	case PropServerReference:
		return cConnack | cDisconnect
	case PropReasonString:
		return cConnack | cAcks | cSuback | cUnsuback | cDisconnect | cAuth
	case PropReceiveMaximum, PropTopicAliasMaximum, PropMaximumPacketSize:
		return cConnect | cConnack
	case PropTopicAlias:
		return cPublish
	case PropUser:
		return cConnect | cConnack | cPublish | ctxWill | cAcks | cSubscribe | cSuback | cUnsub | cUnsuback |
			cDisconnect | cAuth
	}
	return 0
}

// propName is the short name used in errors and Describe.
func propName(id PropID) string {
	switch id {
	case PropPayloadFormat:
		return "payload-format"
	case PropMessageExpiry:
		return "expiry"
	case PropContentType:
		return "content-type"
	case PropResponseTopic:
		return "response-topic"
	case PropCorrelationData:
		return "correlation"
	case PropSubscriptionID:
		return "subid"
	case PropSessionExpiry:
		return "session-expiry"
	case PropAssignedClientID:
		return "assigned-id"
	case PropServerKeepAlive:
		return "server-keepalive"
	case PropAuthMethod:
		return "auth-method"
	case PropAuthData:
		return "auth-data"
	case PropRequestProblemInfo:
		return "req-problem"
	case PropWillDelay:
		return "will-delay"
	case PropRequestResponseInfo:
		return "req-response"
	case PropResponseInfo:
		return "response-info"
	case PropServerReference:
		return "server-ref"
	case PropReasonString:
		return "reason"
	case PropReceiveMaximum:
		return "receive-max"
	case PropTopicAliasMaximum:
		return "alias-max"
	case PropTopicAlias:
		return "alias"
	case PropMaximumQoS:
		return "max-qos"
	case PropRetainAvailable:
		return "retain-avail"
	case PropUser:
		return "user"
	case PropMaximumPacketSize:
		return "max-packet"
	case PropWildcardSubAvailable:
		return "wildcard-avail"
	case PropSubscriptionIDAvailable:
		return "subid-avail"
	case PropSharedSubAvailable:
		return "shared-avail"
	}
	return "unknown"
}

// propKind is a property's wire data type.
type propKind byte

const (
	kByte propKind = iota + 1
	kU16
	kU32
	kVBI
	kString
	kBinary
	kPair
)

func kindOf(id PropID) propKind {
	switch id {
	case PropPayloadFormat, PropRequestProblemInfo, PropRequestResponseInfo, PropMaximumQoS,
		PropRetainAvailable, PropWildcardSubAvailable, PropSubscriptionIDAvailable, PropSharedSubAvailable:
		return kByte
	case PropServerKeepAlive, PropReceiveMaximum, PropTopicAliasMaximum, PropTopicAlias:
		return kU16
	case PropMessageExpiry, PropSessionExpiry, PropWillDelay, PropMaximumPacketSize:
		return kU32
	case PropSubscriptionID:
		return kVBI
	case PropContentType, PropResponseTopic, PropAssignedClientID, PropAuthMethod, PropResponseInfo,
		PropServerReference, PropReasonString:
		return kString
	case PropCorrelationData, PropAuthData:
		return kBinary
	case PropUser:
		return kPair
	}
	return 0
}

// The scalar fields, by identifier, so encoding and decoding need one switch.
func (p *Properties) byteField(id PropID) *byte {
	switch id {
	case PropPayloadFormat:
		return &p.PayloadFormat
	case PropRequestProblemInfo:
		return &p.RequestProblemInfo
	case PropRequestResponseInfo:
		return &p.RequestResponseInfo
	case PropMaximumQoS:
		return &p.MaximumQoS
	case PropRetainAvailable:
		return &p.RetainAvailable
	case PropWildcardSubAvailable:
		return &p.WildcardSubAvailable
	case PropSubscriptionIDAvailable:
		return &p.SubIDAvailable
	case PropSharedSubAvailable:
		return &p.SharedSubAvailable
	}
	return nil
}

func (p *Properties) u16Field(id PropID) *uint16 {
	switch id {
	case PropServerKeepAlive:
		return &p.ServerKeepAlive
	case PropReceiveMaximum:
		return &p.ReceiveMaximum
	case PropTopicAliasMaximum:
		return &p.TopicAliasMaximum
	case PropTopicAlias:
		return &p.TopicAlias
	}
	return nil
}

func (p *Properties) u32Field(id PropID) *uint32 {
	switch id {
	case PropMessageExpiry:
		return &p.MessageExpiry
	case PropSessionExpiry:
		return &p.SessionExpiry
	case PropWillDelay:
		return &p.WillDelay
	case PropMaximumPacketSize:
		return &p.MaximumPacketSize
	}
	return nil
}

func (p *Properties) stringField(id PropID) *string {
	switch id {
	case PropContentType:
		return &p.ContentType
	case PropResponseTopic:
		return &p.ResponseTopic
	case PropAssignedClientID:
		return &p.AssignedClientID
	case PropAuthMethod:
		return &p.AuthMethod
	case PropResponseInfo:
		return &p.ResponseInfo
	case PropServerReference:
		return &p.ServerReference
	case PropReasonString:
		return &p.ReasonString
	}
	return nil
}

func (p *Properties) binaryField(id PropID) *[]byte {
	switch id {
	case PropCorrelationData:
		return &p.CorrelationData
	case PropAuthData:
		return &p.AuthData
	}
	return nil
}

// Empty reports whether no property would be written.
func (p *Properties) Empty() bool {
	return p.Present&^(1<<PropUser|1<<PropSubscriptionID) == 0 && len(p.User) == 0 && len(p.SubscriptionIDs) == 0
}

// scalarSet is the Present bits the encoder honours; User and
// SubscriptionIDs are present by being non-empty.
func (p *Properties) scalarSet() PropSet {
	return p.Present &^ (1<<PropUser | 1<<PropSubscriptionID)
}

// checkByteValue enforces the 0-or-1 rule for byte properties (MQTT 5
// §3.1.2.11, §3.2.2.3, §3.3.2.3.2).
func checkByteValue(id PropID, v byte) error {
	if v > 1 {
		return protocolErr("property " + propName(id) + ": value other than 0 or 1")
	}
	return nil
}

// checkValue enforces the value rules of the scalar properties that have
// them. Topic Alias 0 maps to Topic Alias invalid (MQTT 5 §3.3.2.3.4).
func checkValue(p *Properties, id PropID) error {
	switch kindOf(id) {
	case kByte:
		return checkByteValue(id, *p.byteField(id))
	case kU16:
		if id == PropReceiveMaximum && p.ReceiveMaximum == 0 {
			return protocolErr("property receive-max: value 0")
		}
		if id == PropTopicAlias && p.TopicAlias == 0 {
			return &Error{Code: TopicAliasInvalid, Msg: "property alias: value 0", kind: ErrTopicAlias}
		}
	case kU32:
		if id == PropMaximumPacketSize && p.MaximumPacketSize == 0 {
			return protocolErr("property max-packet: value 0")
		}
	case kString:
		if id == PropResponseTopic && hasWildcardString(p.ResponseTopic) {
			return protocolErr("property response-topic: contains a wildcard")
		}
	}
	return nil
}

// decodeProps reads a property length and the properties that follow into
// p, checking that each is allowed in ctx, is not repeated (except User
// Property, and Subscription Identifier in PUBLISH) and has a valid value.
func (d *decoder) decodeProps(c *cursor, ctx propCtx, p *Properties) error {
	n, err := c.vbi("property length")
	if err != nil {
		return err
	}
	if int(n) > c.left() {
		return overrun("property length")
	}
	pc := cursor{b: c.b[:c.i+int(n)], i: c.i}
	c.i += int(n)
	userStart, subStart := len(d.users), len(d.subIDs)
	for pc.left() > 0 {
		b, _ := pc.u8("property identifier")
		id := PropID(b)
		allowed := propCtx(0)
		if b < 64 {
			allowed = allowedIn(id)
		}
		if allowed == 0 {
			return malformed("unknown property identifier")
		}
		if allowed&ctx == 0 {
			return protocolErr("property " + propName(id) + " not allowed in " + ctxName(ctx))
		}
		switch id {
		case PropUser:
			k, err := pc.str("property user: name")
			if err != nil {
				return err
			}
			v, err := pc.str("property user: value")
			if err != nil {
				return err
			}
			d.users = append(d.users, UserProperty{Key: k, Value: v})
			continue
		case PropSubscriptionID:
			if ctx != cPublish && len(d.subIDs) > subStart {
				return protocolErr("property subid: repeated")
			}
			v, err := pc.vbi("property subid")
			if err != nil {
				return err
			}
			if v == 0 {
				return protocolErr("property subid: value 0")
			}
			d.subIDs = append(d.subIDs, v)
			continue
		}
		if p.Has(id) {
			return protocolErr("property " + propName(id) + ": repeated")
		}
		p.Mark(id)
		what := propName(id)
		switch kindOf(id) {
		case kByte:
			*p.byteField(id), err = pc.u8(what)
		case kU16:
			*p.u16Field(id), err = pc.u16(what)
		case kU32:
			*p.u32Field(id), err = pc.u32(what)
		case kString:
			*p.stringField(id), err = pc.str(what)
		case kBinary:
			*p.binaryField(id), err = pc.binary(what)
		}
		if err != nil {
			return err
		}
		if err := checkValue(p, id); err != nil {
			return err
		}
	}
	if len(d.users) > userStart {
		p.User = d.users[userStart:len(d.users):len(d.users)]
	}
	if len(d.subIDs) > subStart {
		p.SubscriptionIDs = d.subIDs[subStart:len(d.subIDs):len(d.subIDs)]
	}
	return nil
}

func ctxName(ctx propCtx) string {
	if ctx == ctxWill {
		return "will properties"
	}
	for t := CONNECT; t <= AUTH; t++ {
		if ctx == ctxOf(t) {
			return t.String()
		}
	}
	return "?"
}

// checkProps validates p for encoding in ctx and returns the size of the
// property bytes (not counting the property length prefix).
func checkProps(p *Properties, ctx propCtx) (int, error) {
	size := 0
	for set := p.scalarSet(); set != 0; set &= set - 1 {
		id := PropID(bits.TrailingZeros64(uint64(set)))
		allowed := propCtx(0)
		if id < 64 {
			allowed = allowedIn(id)
		}
		if allowed == 0 {
			return 0, malformed("unknown property identifier")
		}
		if allowed&ctx == 0 {
			return 0, protocolErr("property " + propName(id) + " not allowed in " + ctxName(ctx))
		}
		if err := checkValue(p, id); err != nil {
			return 0, err
		}
		size++
		switch kindOf(id) {
		case kByte:
			size++
		case kU16:
			size += 2
		case kU32:
			size += 4
		case kString:
			s := *p.stringField(id)
			if len(s) > maxString || !validUTF8String(s) {
				return 0, malformed("property " + propName(id) + ": not a valid UTF-8 Encoded String of at most 65535 bytes")
			}
			size += 2 + len(s)
		case kBinary:
			b := *p.binaryField(id)
			if len(b) > maxString {
				return 0, malformed("property " + propName(id) + ": binary data longer than 65535 bytes")
			}
			size += 2 + len(b)
		}
	}
	if len(p.SubscriptionIDs) > 0 {
		if allowedIn(PropSubscriptionID)&ctx == 0 {
			return 0, protocolErr("property subid not allowed in " + ctxName(ctx))
		}
		if ctx != cPublish && len(p.SubscriptionIDs) > 1 {
			return 0, protocolErr("property subid: repeated")
		}
		for _, id := range p.SubscriptionIDs {
			if id == 0 || id > maxVBI {
				return 0, protocolErr("property subid: value out of range")
			}
			size += 1 + vbiLen(int(id))
		}
	}
	if len(p.User) > 0 {
		if allowedIn(PropUser)&ctx == 0 {
			return 0, protocolErr("property user not allowed in " + ctxName(ctx))
		}
		for i := range p.User {
			u := &p.User[i]
			if err := checkString(u.Key, "property user: name"); err != nil {
				return 0, err
			}
			if err := checkString(u.Value, "property user: value"); err != nil {
				return 0, err
			}
			size += 5 + len(u.Key) + len(u.Value)
		}
	}
	if size > maxVBI {
		return 0, malformed("properties too long")
	}
	return size, nil
}

// appendProps writes the property length and the properties, in identifier
// order with Subscription Identifiers and User Properties at their places.
// p must have passed checkProps, which returned size.
func appendProps(dst []byte, p *Properties, size int) []byte {
	dst = appendVBI(dst, size)
	set := p.scalarSet()
	if len(p.SubscriptionIDs) > 0 {
		set |= 1 << PropSubscriptionID
	}
	if len(p.User) > 0 {
		set |= 1 << PropUser
	}
	for ; set != 0; set &= set - 1 {
		id := PropID(bits.TrailingZeros64(uint64(set)))
		switch kindOf(id) {
		case kByte:
			dst = append(dst, byte(id), *p.byteField(id))
		case kU16:
			dst = appendU16(append(dst, byte(id)), *p.u16Field(id))
		case kU32:
			dst = appendU32(append(dst, byte(id)), *p.u32Field(id))
		case kString:
			dst = appendString(append(dst, byte(id)), *p.stringField(id))
		case kBinary:
			dst = appendBinary(append(dst, byte(id)), *p.binaryField(id))
		case kVBI:
			for _, v := range p.SubscriptionIDs {
				dst = appendVBI(append(dst, byte(id)), int(v))
			}
		case kPair:
			for i := range p.User {
				dst = append(dst, byte(PropUser))
				dst = appendString(dst, p.User[i].Key)
				dst = appendString(dst, p.User[i].Value)
			}
		}
	}
	return dst
}

// String returns the property's short name, as Describe prints it.
func (id PropID) String() string {
	if !id.Known() {
		return "property(" + hexByte(byte(id)) + ")"
	}
	return propName(id)
}

// Known reports whether id is a property MQTT 5 defines.
func (id PropID) Known() bool { return id < 64 && allowedIn(id) != 0 }
