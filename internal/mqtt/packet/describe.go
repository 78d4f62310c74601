package packet

import (
	"math/bits"
	"reflect"
	"strconv"
	"strings"
)

// String returns the packet type's name, for example "PUBLISH".
func (t Type) String() string {
	switch t {
	case 0:
		return "RESERVED"
	case CONNECT:
		return "CONNECT"
	case CONNACK:
		return "CONNACK"
	case PUBLISH:
		return "PUBLISH"
	case PUBACK:
		return "PUBACK"
	case PUBREC:
		return "PUBREC"
	case PUBREL:
		return "PUBREL"
	case PUBCOMP:
		return "PUBCOMP"
	case SUBSCRIBE:
		return "SUBSCRIBE"
	case SUBACK:
		return "SUBACK"
	case UNSUBSCRIBE:
		return "UNSUBSCRIBE"
	case UNSUBACK:
		return "UNSUBACK"
	case PINGREQ:
		return "PINGREQ"
	case PINGRESP:
		return "PINGRESP"
	case DISCONNECT:
		return "DISCONNECT"
	case AUTH:
		return "AUTH"
	}
	return "TYPE(" + strconv.Itoa(int(t)) + ")"
}

// String returns "3.1", "3.1.1" or "5".
func (v Version) String() string {
	switch v {
	case V31:
		return "3.1"
	case V311:
		return "3.1.1"
	case V5:
		return "5"
	}
	return "level(" + strconv.Itoa(int(v)) + ")"
}

// Describe renders p on one line for logs and golden traces, for example
//
//	PUBLISH id=3 qos=1 dup retain topic="a/b" len=12 props=[expiry=10]
//
// Secrets are not printed: passwords and binary data appear as lengths.
func Describe(p Packet) string {
	var b strings.Builder
	describe(&b, p)
	return b.String()
}

func describe(b *strings.Builder, p Packet) {
	if p == nil || reflect.ValueOf(p).IsNil() {
		b.WriteString("<nil>")
		return
	}
	switch p := p.(type) {
	case *Connect:
		b.WriteString("CONNECT")
		if p.Version != 0 {
			b.WriteString(" v")
			b.WriteString(p.Version.String())
		}
		b.WriteString(" client=")
		b.WriteString(strconv.Quote(p.ClientID))
		if p.CleanStart {
			b.WriteString(" clean")
		}
		num(b, " keepalive=", uint64(p.KeepAlive))
		if p.UsernameFlag {
			b.WriteString(" user=")
			b.WriteString(strconv.Quote(p.Username))
		}
		if p.PasswordFlag {
			num(b, " password=", uint64(len(p.Password)))
			b.WriteByte('B')
		}
		props(b, &p.Props)
		if p.WillFlag {
			num(b, " will=[qos=", uint64(p.WillQoS))
			if p.WillRetain {
				b.WriteString(" retain")
			}
			b.WriteString(" topic=")
			b.WriteString(strconv.Quote(p.WillTopic))
			num(b, " len=", uint64(len(p.WillPayload)))
			props(b, &p.WillProps)
			b.WriteByte(']')
		}
	case *Connack:
		b.WriteString("CONNACK")
		reason(b, p.ReasonCode)
		if p.SessionPresent {
			b.WriteString(" session-present")
		}
		props(b, &p.Props)
	case *Publish:
		b.WriteString("PUBLISH")
		if p.QoS > 0 {
			num(b, " id=", uint64(p.PacketID))
		}
		num(b, " qos=", uint64(p.QoS))
		if p.Dup {
			b.WriteString(" dup")
		}
		if p.Retain {
			b.WriteString(" retain")
		}
		b.WriteString(" topic=")
		b.WriteString(strconv.Quote(p.Topic))
		num(b, " len=", uint64(len(p.Payload)))
		props(b, &p.Props)
	case *Ack:
		b.WriteString(p.Kind.String())
		num(b, " id=", uint64(p.PacketID))
		if p.ReasonCode != Success {
			reason(b, p.ReasonCode)
		}
		props(b, &p.Props)
	case *Subscribe:
		num(b, "SUBSCRIBE id=", uint64(p.PacketID))
		b.WriteString(" subs=[")
		for i, s := range p.Subs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(s.Filter))
			num(b, " qos=", uint64(s.QoS))
			if s.NoLocal {
				b.WriteString(" no-local")
			}
			if s.RetainAsPublished {
				b.WriteString(" rap")
			}
			if s.RetainHandling != 0 {
				num(b, " rh=", uint64(s.RetainHandling))
			}
		}
		b.WriteByte(']')
		props(b, &p.Props)
	case *Suback:
		num(b, "SUBACK id=", uint64(p.PacketID))
		codes(b, p.Codes)
		props(b, &p.Props)
	case *Unsubscribe:
		num(b, "UNSUBSCRIBE id=", uint64(p.PacketID))
		b.WriteString(" filters=[")
		for i, f := range p.Filters {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Quote(f))
		}
		b.WriteByte(']')
		props(b, &p.Props)
	case *Unsuback:
		num(b, "UNSUBACK id=", uint64(p.PacketID))
		if len(p.Codes) > 0 {
			codes(b, p.Codes)
		}
		props(b, &p.Props)
	case *Pingreq:
		b.WriteString("PINGREQ")
	case *Pingresp:
		b.WriteString("PINGRESP")
	case *Disconnect:
		b.WriteString("DISCONNECT")
		reason(b, p.ReasonCode)
		props(b, &p.Props)
	case *Auth:
		b.WriteString("AUTH")
		reason(b, p.ReasonCode)
		props(b, &p.Props)
	default:
		b.WriteString(p.Type().String())
	}
}

func num(b *strings.Builder, label string, v uint64) {
	b.WriteString(label)
	var buf [20]byte
	b.Write(strconv.AppendUint(buf[:0], v, 10))
}

func reason(b *strings.Builder, c ReasonCode) {
	b.WriteString(" rc=")
	b.WriteString(hexByte(byte(c)))
}

func codes(b *strings.Builder, cs []ReasonCode) {
	b.WriteString(" codes=[")
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(hexByte(byte(c)))
	}
	b.WriteByte(']')
}

// props writes " props=[...]" in identifier order, or nothing if empty.
func props(b *strings.Builder, p *Properties) {
	if p.Empty() {
		return
	}
	b.WriteString(" props=[")
	set := p.scalarSet()
	if len(p.SubscriptionIDs) > 0 {
		set |= 1 << PropSubscriptionID
	}
	if len(p.User) > 0 {
		set |= 1 << PropUser
	}
	first := true
	for ; set != 0; set &= set - 1 {
		id := PropID(bits.TrailingZeros64(uint64(set)))
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(propName(id))
		b.WriteByte('=')
		switch kindOf(id) {
		case kByte:
			num(b, "", uint64(*p.byteField(id)))
		case kU16:
			num(b, "", uint64(*p.u16Field(id)))
		case kU32:
			num(b, "", uint64(*p.u32Field(id)))
		case kString:
			b.WriteString(strconv.Quote(*p.stringField(id)))
		case kBinary:
			num(b, "", uint64(len(*p.binaryField(id))))
			b.WriteByte('B')
		case kVBI:
			for i, v := range p.SubscriptionIDs {
				if i > 0 {
					b.WriteByte(',')
				}
				num(b, "", uint64(v))
			}
		case kPair:
			for i, u := range p.User {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Quote(u.Key))
				b.WriteByte(':')
				b.WriteString(strconv.Quote(u.Value))
			}
		default:
			b.WriteByte('?')
		}
	}
	b.WriteByte(']')
}

func (p *Connect) String() string     { return Describe(p) }
func (p *Connack) String() string     { return Describe(p) }
func (p *Publish) String() string     { return Describe(p) }
func (p *Ack) String() string         { return Describe(p) }
func (p *Subscribe) String() string   { return Describe(p) }
func (p *Suback) String() string      { return Describe(p) }
func (p *Unsubscribe) String() string { return Describe(p) }
func (p *Unsuback) String() string    { return Describe(p) }
func (p *Pingreq) String() string     { return Describe(p) }
func (p *Pingresp) String() string    { return Describe(p) }
func (p *Disconnect) String() string  { return Describe(p) }
func (p *Auth) String() string        { return Describe(p) }
