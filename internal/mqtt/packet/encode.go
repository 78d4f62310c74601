package packet

import "slices"

// Every Append validates the packet for version v before writing anything;
// on error it returns dst unchanged. It computes the remaining length
// exactly, grows dst once, and so does not allocate when dst has room.
//
// Properties are an MQTT 5 feature: for 3.1 and 3.1.1 they are not written
// (and not checked), so a packet received from an MQTT 5 client can be sent
// to a 3.1.1 one as is. Reason codes are mapped to 3.1.1 return codes or
// dropped where 3.1.1 has none.

var (
	_ Packet = (*Connect)(nil)
	_ Packet = (*Connack)(nil)
	_ Packet = (*Publish)(nil)
	_ Packet = (*Ack)(nil)
	_ Packet = (*Subscribe)(nil)
	_ Packet = (*Suback)(nil)
	_ Packet = (*Unsubscribe)(nil)
	_ Packet = (*Unsuback)(nil)
	_ Packet = (*Pingreq)(nil)
	_ Packet = (*Pingresp)(nil)
	_ Packet = (*Disconnect)(nil)
	_ Packet = (*Auth)(nil)
)

// appendHeader appends the fixed header and grows dst for the whole packet.
func appendHeader(dst []byte, b0 byte, rl int) []byte {
	dst = slices.Grow(dst, 1+vbiLen(rl)+rl)
	return appendVBI(append(dst, b0), rl)
}

func checkLength(what string, rl int) error {
	if rl > MaxRemainingLength {
		return &Error{Code: PacketTooLarge, Msg: what + ": remaining length over 268435455", kind: ErrTooLarge}
	}
	return nil
}

// propsLen returns the encoded size of a property block of size n
// including its length prefix.
func propsLen(n int) int { return vbiLen(n) + n }

func errVersionField(what string) error {
	return protocolErr(what + ": Version field disagrees with the version being encoded")
}

// Append encodes CONNECT. The protocol name and level come from v; Version
// and ProtocolName, when set, must agree with it. Will fields are written
// only when WillFlag is set, user name and password only with their flags.
func (p *Connect) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	name := "MQTT"
	if v == V31 {
		name = "MQIsdp"
	}
	if p.Version != 0 && p.Version != v || p.ProtocolName != "" && p.ProtocolName != name {
		return dst, errVersionField("CONNECT")
	}
	v5 := v == V5
	rl := 2 + len(name) + 1 + 1 + 2
	var flags byte
	if p.CleanStart {
		flags |= 0x02
	}
	var psize, wsize int
	var err error
	if v5 {
		if psize, err = checkProps(&p.Props, cConnect); err != nil {
			return dst, err
		}
		rl += propsLen(psize)
	}
	if err := checkString(p.ClientID, "CONNECT: client identifier"); err != nil {
		return dst, err
	}
	rl += 2 + len(p.ClientID)
	if p.WillFlag {
		if p.WillQoS > 2 {
			return dst, malformed("CONNECT: will QoS 3")
		}
		if err := checkTopicString(p.WillTopic, "CONNECT: will topic", false); err != nil {
			return dst, err
		}
		if err := checkBinary(p.WillPayload, "CONNECT: will payload"); err != nil {
			return dst, err
		}
		if v5 {
			if wsize, err = checkProps(&p.WillProps, ctxWill); err != nil {
				return dst, err
			}
			rl += propsLen(wsize)
		}
		flags |= 0x04 | p.WillQoS<<3
		if p.WillRetain {
			flags |= 0x20
		}
		rl += 2 + len(p.WillTopic) + 2 + len(p.WillPayload)
	}
	if p.UsernameFlag {
		if err := checkString(p.Username, "CONNECT: user name"); err != nil {
			return dst, err
		}
		flags |= 0x80
		rl += 2 + len(p.Username)
	}
	if p.PasswordFlag {
		if !v5 && !p.UsernameFlag {
			return dst, protocolErr("CONNECT: password flag without user name flag")
		}
		if err := checkBinary(p.Password, "CONNECT: password"); err != nil {
			return dst, err
		}
		flags |= 0x40
		rl += 2 + len(p.Password)
	}
	if err := checkLength("CONNECT", rl); err != nil {
		return dst, err
	}
	dst = appendHeader(dst, byte(CONNECT)<<4, rl)
	dst = appendString(dst, name)
	dst = append(dst, byte(v), flags)
	dst = appendU16(dst, p.KeepAlive)
	if v5 {
		dst = appendProps(dst, &p.Props, psize)
	}
	dst = appendString(dst, p.ClientID)
	if p.WillFlag {
		if v5 {
			dst = appendProps(dst, &p.WillProps, wsize)
		}
		dst = appendString(dst, p.WillTopic)
		dst = appendBinary(dst, p.WillPayload)
	}
	if p.UsernameFlag {
		dst = appendString(dst, p.Username)
	}
	if p.PasswordFlag {
		dst = appendBinary(dst, p.Password)
	}
	return dst, nil
}

// checkTopicString checks a topic name for encoding: a valid UTF-8 Encoded
// String without wildcards, not empty unless emptyOK.
func checkTopicString(s, what string, emptyOK bool) error {
	if err := checkString(s, what); err != nil {
		return err
	}
	if s == "" && !emptyOK {
		return protocolErr(what + ": empty topic name")
	}
	if hasWildcardString(s) {
		return protocolErr(what + ": wildcard in topic name")
	}
	return nil
}

// Append encodes CONNACK; for 3.1.1 the reason code becomes a return code
// (0x84→1, 0x85→2, 0x86→4, 0x87 and 0x8A→5, other failures→3).
func (p *Connack) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if err := checkReason(CONNACK, p.ReasonCode); err != nil {
		return dst, err
	}
	if p.SessionPresent && p.ReasonCode != Success {
		return dst, protocolErr("CONNACK: session present with a failure code")
	}
	rl := 2
	psize := 0
	v5 := v == V5
	if v5 {
		var err error
		if psize, err = checkProps(&p.Props, cConnack); err != nil {
			return dst, err
		}
		rl += propsLen(psize)
	}
	if err := checkLength("CONNACK", rl); err != nil {
		return dst, err
	}
	dst = appendHeader(dst, byte(CONNACK)<<4, rl)
	var flags byte
	if p.SessionPresent {
		flags = 1
	}
	if v5 {
		dst = append(dst, flags, byte(p.ReasonCode))
		return appendProps(dst, &p.Props, psize), nil
	}
	return append(dst, flags, connackCode311(p.ReasonCode)), nil
}

// Append encodes PUBLISH.
func (p *Publish) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if p.QoS > 2 {
		return dst, malformed("PUBLISH: QoS 3")
	}
	if p.Dup && p.QoS == 0 {
		return dst, malformed("PUBLISH: DUP set on QoS 0")
	}
	if (p.QoS == 0) != (p.PacketID == 0) {
		return dst, protocolErr("PUBLISH: packet identifier must be set exactly when QoS > 0")
	}
	v5 := v == V5
	if err := checkTopicString(p.Topic, "PUBLISH: topic", v5 && p.Props.Has(PropTopicAlias)); err != nil {
		return dst, err
	}
	rl := 2 + len(p.Topic) + len(p.Payload)
	if p.QoS > 0 {
		rl += 2
	}
	psize := 0
	if v5 {
		var err error
		if psize, err = checkProps(&p.Props, cPublish); err != nil {
			return dst, err
		}
		rl += propsLen(psize)
	}
	if err := checkLength("PUBLISH", rl); err != nil {
		return dst, err
	}
	b0 := byte(PUBLISH)<<4 | p.QoS<<1
	if p.Dup {
		b0 |= 8
	}
	if p.Retain {
		b0 |= 1
	}
	dst = appendHeader(dst, b0, rl)
	dst = appendString(dst, p.Topic)
	if p.QoS > 0 {
		dst = appendU16(dst, p.PacketID)
	}
	if v5 {
		dst = appendProps(dst, &p.Props, psize)
	}
	return append(dst, p.Payload...), nil
}

// reasonTail sizes the optional reason code and properties that end the
// MQTT 5 acks, DISCONNECT and AUTH. It returns the bytes they take (0: none,
// the code is Success with no properties) and the property size (-1: the
// property length is left out). AUTH always writes the property length
// after a reason code; the others may stop after the code.
func reasonTail(t Type, rc ReasonCode, props *Properties, alwaysPropLen bool) (n int, psize int, err error) {
	if err := checkReason(t, rc); err != nil {
		return 0, 0, err
	}
	if psize, err = checkProps(props, ctxOf(t)); err != nil {
		return 0, 0, err
	}
	switch {
	case rc == Success && psize == 0:
		return 0, -1, nil
	case psize == 0 && !alwaysPropLen:
		return 1, -1, nil
	}
	return 1 + propsLen(psize), psize, nil
}

func appendReasonTail(dst []byte, n int, rc ReasonCode, props *Properties, psize int) []byte {
	if n == 0 {
		return dst
	}
	dst = append(dst, byte(rc))
	if psize < 0 {
		return dst
	}
	return appendProps(dst, props, psize)
}

// Append encodes PUBACK, PUBREC, PUBREL or PUBCOMP as given by Kind. In
// MQTT 5 a Success code with no properties is omitted (§3.4.2.1); in 3.1.1
// the reason code and properties are not written.
func (p *Ack) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if p.Kind < PUBACK || p.Kind > PUBCOMP {
		return dst, protocolErr("Ack: Kind is not PUBACK, PUBREC, PUBREL or PUBCOMP")
	}
	if p.PacketID == 0 {
		return dst, protocolErr(p.Kind.String() + ": packet identifier 0")
	}
	b0 := byte(p.Kind) << 4
	if p.Kind == PUBREL {
		b0 |= 2
	}
	if v != V5 {
		if err := checkReason(p.Kind, p.ReasonCode); err != nil {
			return dst, err
		}
		return appendU16(appendHeader(dst, b0, 2), p.PacketID), nil
	}
	n, psize, err := reasonTail(p.Kind, p.ReasonCode, &p.Props, false)
	if err == nil {
		err = checkLength(p.Kind.String(), 2+n)
	}
	if err != nil {
		return dst, err
	}
	dst = appendU16(appendHeader(dst, b0, 2+n), p.PacketID)
	return appendReasonTail(dst, n, p.ReasonCode, &p.Props, psize), nil
}

// Append encodes SUBSCRIBE. The MQTT 5 subscription options (NoLocal,
// RetainAsPublished, RetainHandling) cannot be expressed in 3.1.1: setting
// them is an error there.
func (p *Subscribe) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if p.PacketID == 0 {
		return dst, protocolErr("SUBSCRIBE: packet identifier 0")
	}
	if len(p.Subs) == 0 {
		return dst, protocolErr("SUBSCRIBE: no topic filters")
	}
	v5 := v == V5
	rl := 2
	for i := range p.Subs {
		s := &p.Subs[i]
		if err := checkString(s.Filter, "SUBSCRIBE: topic filter"); err != nil {
			return dst, err
		}
		if s.QoS > 2 {
			return dst, malformed("SUBSCRIBE: QoS 3")
		}
		if s.RetainHandling > 2 {
			return dst, protocolErr("SUBSCRIBE: retain handling 3")
		}
		if !v5 && (s.NoLocal || s.RetainAsPublished || s.RetainHandling != 0) {
			return dst, protocolErr("SUBSCRIBE: MQTT 5 subscription options in 3.1.1")
		}
		rl += 2 + len(s.Filter) + 1
	}
	psize := 0
	if v5 {
		var err error
		if psize, err = checkProps(&p.Props, cSubscribe); err != nil {
			return dst, err
		}
		rl += propsLen(psize)
	}
	if err := checkLength("SUBSCRIBE", rl); err != nil {
		return dst, err
	}
	dst = appendU16(appendHeader(dst, byte(SUBSCRIBE)<<4|2, rl), p.PacketID)
	if v5 {
		dst = appendProps(dst, &p.Props, psize)
	}
	for i := range p.Subs {
		s := &p.Subs[i]
		o := s.QoS | s.RetainHandling<<4
		if s.NoLocal {
			o |= 4
		}
		if s.RetainAsPublished {
			o |= 8
		}
		dst = append(appendString(dst, s.Filter), o)
	}
	return dst, nil
}

// Append encodes SUBACK; for 3.1.1 failure codes become 0x80.
func (p *Suback) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if p.PacketID == 0 {
		return dst, protocolErr("SUBACK: packet identifier 0")
	}
	if len(p.Codes) == 0 {
		return dst, protocolErr("SUBACK: no reason codes")
	}
	for _, c := range p.Codes {
		if err := checkReason(SUBACK, c); err != nil {
			return dst, err
		}
	}
	v5 := v == V5
	rl := 2 + len(p.Codes)
	psize := 0
	if v5 {
		var err error
		if psize, err = checkProps(&p.Props, cSuback); err != nil {
			return dst, err
		}
		rl += propsLen(psize)
	}
	if err := checkLength("SUBACK", rl); err != nil {
		return dst, err
	}
	dst = appendU16(appendHeader(dst, byte(SUBACK)<<4, rl), p.PacketID)
	if v5 {
		dst = appendProps(dst, &p.Props, psize)
		for _, c := range p.Codes {
			dst = append(dst, byte(c))
		}
		return dst, nil
	}
	for _, c := range p.Codes {
		dst = append(dst, subackCode311(c))
	}
	return dst, nil
}

// Append encodes UNSUBSCRIBE.
func (p *Unsubscribe) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if p.PacketID == 0 {
		return dst, protocolErr("UNSUBSCRIBE: packet identifier 0")
	}
	if len(p.Filters) == 0 {
		return dst, protocolErr("UNSUBSCRIBE: no topic filters")
	}
	rl := 2
	for _, f := range p.Filters {
		if err := checkString(f, "UNSUBSCRIBE: topic filter"); err != nil {
			return dst, err
		}
		rl += 2 + len(f)
	}
	v5 := v == V5
	psize := 0
	if v5 {
		var err error
		if psize, err = checkProps(&p.Props, cUnsub); err != nil {
			return dst, err
		}
		rl += propsLen(psize)
	}
	if err := checkLength("UNSUBSCRIBE", rl); err != nil {
		return dst, err
	}
	dst = appendU16(appendHeader(dst, byte(UNSUBSCRIBE)<<4|2, rl), p.PacketID)
	if v5 {
		dst = appendProps(dst, &p.Props, psize)
	}
	for _, f := range p.Filters {
		dst = appendString(dst, f)
	}
	return dst, nil
}

// Append encodes UNSUBACK; in 3.1.1 it is only the packet identifier.
func (p *Unsuback) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if p.PacketID == 0 {
		return dst, protocolErr("UNSUBACK: packet identifier 0")
	}
	if v != V5 {
		return appendU16(appendHeader(dst, byte(UNSUBACK)<<4, 2), p.PacketID), nil
	}
	if len(p.Codes) == 0 {
		return dst, protocolErr("UNSUBACK: no reason codes")
	}
	for _, c := range p.Codes {
		if err := checkReason(UNSUBACK, c); err != nil {
			return dst, err
		}
	}
	psize, err := checkProps(&p.Props, cUnsuback)
	if err != nil {
		return dst, err
	}
	rl := 2 + propsLen(psize) + len(p.Codes)
	if err := checkLength("UNSUBACK", rl); err != nil {
		return dst, err
	}
	dst = appendU16(appendHeader(dst, byte(UNSUBACK)<<4, rl), p.PacketID)
	dst = appendProps(dst, &p.Props, psize)
	for _, c := range p.Codes {
		dst = append(dst, byte(c))
	}
	return dst, nil
}

// Append encodes PINGREQ.
func (*Pingreq) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	return append(dst, byte(PINGREQ)<<4, 0), nil
}

// Append encodes PINGRESP.
func (*Pingresp) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	return append(dst, byte(PINGRESP)<<4, 0), nil
}

// Append encodes DISCONNECT. In MQTT 5 a Normal disconnection with no
// properties is the two-byte packet (§3.14.2.1); 3.1.1 has no variable header.
func (p *Disconnect) Append(dst []byte, v Version) ([]byte, error) {
	if err := checkVersion(v, false); err != nil {
		return dst, err
	}
	if v != V5 {
		if err := checkReason(DISCONNECT, p.ReasonCode); err != nil {
			return dst, err
		}
		return append(dst, byte(DISCONNECT)<<4, 0), nil
	}
	n, psize, err := reasonTail(DISCONNECT, p.ReasonCode, &p.Props, false)
	if err == nil {
		err = checkLength("DISCONNECT", n)
	}
	if err != nil {
		return dst, err
	}
	dst = appendHeader(dst, byte(DISCONNECT)<<4, n)
	return appendReasonTail(dst, n, p.ReasonCode, &p.Props, psize), nil
}

// Append encodes AUTH, which exists only in MQTT 5.
func (p *Auth) Append(dst []byte, v Version) ([]byte, error) {
	if v != V5 {
		return dst, protocolErr("AUTH exists only in MQTT 5")
	}
	n, psize, err := reasonTail(AUTH, p.ReasonCode, &p.Props, true)
	if err == nil {
		err = checkLength("AUTH", n)
	}
	if err != nil {
		return dst, err
	}
	dst = appendHeader(dst, byte(AUTH)<<4, n)
	return appendReasonTail(dst, n, p.ReasonCode, &p.Props, psize), nil
}
