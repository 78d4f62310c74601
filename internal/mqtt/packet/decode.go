package packet

import "io"

// Decode decodes exactly one packet from the start of b and returns it with
// the number of bytes it used. v is the connection's protocol version, or 0
// before CONNECT: then only a CONNECT decodes, parsed by its own protocol
// level. A b that holds only part of a packet gives io.ErrUnexpectedEOF.
//
// The packet is freshly allocated, but its byte slices (Payload, Password,
// CorrelationData, ...) alias b.
func Decode(b []byte, v Version) (Packet, int, error) {
	if len(b) > 0 && v == 0 && Type(b[0]>>4) != CONNECT {
		return nil, 0, protocolErr(Type(b[0]>>4).String() + " before CONNECT")
	}
	h, err := parseHeader(b)
	if err != nil {
		return nil, 0, err
	}
	total := h.n + h.rl
	if len(b) < total {
		return nil, 0, io.ErrUnexpectedEOF
	}
	var d decoder
	p, err := d.decode(h, b[h.n:total], v)
	if err != nil {
		return nil, 0, err
	}
	return p, total, nil
}

// header is a parsed fixed header.
type header struct {
	typ   Type
	flags byte
	rl    int // remaining length
	n     int // bytes of fixed header
}

// parseHeader parses the fixed header at the start of b. It returns
// io.ErrUnexpectedEOF when b ends inside the header.
func parseHeader(b []byte) (header, error) {
	if len(b) == 0 {
		return header{}, io.ErrUnexpectedEOF
	}
	rl, n, err := readVBI(b[1:])
	switch err {
	case nil:
	case errShortVBI:
		return header{}, io.ErrUnexpectedEOF
	default:
		return header{}, malformed("remaining length: " + err.Error())
	}
	return header{typ: Type(b[0] >> 4), flags: b[0] & 0x0f, rl: int(rl), n: 1 + n}, nil
}

// scratchCap bounds the element capacity a Reader keeps in its scratch
// slices between packets, so one huge packet does not pin memory.
const scratchCap = 1024

// decoder holds the scratch state of decoding. Decode uses a fresh one per
// packet; a Reader keeps one and sets reuse, so packet structs and the
// backing arrays of their slices are recycled from packet to packet.
type decoder struct {
	reuse bool

	users   []UserProperty
	subIDs  []uint32
	subs    []Subscription
	codes   []ReasonCode
	filters []string

	// lastTopic caches the previous PUBLISH topic: a connection that
	// publishes to one topic repeatedly decodes without allocating.
	lastTopic string

	// The PUBLISH and ack values a Reader hands out, allocated on first use
	// and then reused; other packet types are rare and freshly allocated.
	pub   *Publish
	acked *Ack
}

func (d *decoder) newPublish() *Publish {
	if !d.reuse {
		return new(Publish)
	}
	if d.pub == nil {
		d.pub = new(Publish)
	} else {
		*d.pub = Publish{}
	}
	return d.pub
}

func (d *decoder) newAck() *Ack {
	if !d.reuse {
		return new(Ack)
	}
	if d.acked == nil {
		d.acked = new(Ack)
	} else {
		*d.acked = Ack{}
	}
	return d.acked
}

func trim[T any](s []T) []T {
	if cap(s) > scratchCap {
		return nil
	}
	return s[:0]
}

func (d *decoder) reset() {
	d.users = trim(d.users)
	d.subIDs = trim(d.subIDs)
	d.subs = trim(d.subs)
	d.codes = trim(d.codes)
	d.filters = trim(d.filters)
}

// checkVersion reports whether v is a version the codec speaks (0 meaning
// "not yet known" when allowZero).
func checkVersion(v Version, allowZero bool) error {
	switch v {
	case V31, V311, V5:
		return nil
	case 0:
		if allowZero {
			return nil
		}
	}
	return &Error{Code: UnsupportedProtocolVersion, Msg: "unsupported protocol version", kind: ErrUnsupportedVersion}
}

// decode decodes one packet body. body is exactly the remaining length.
func (d *decoder) decode(h header, body []byte, v Version) (Packet, error) {
	if err := checkVersion(v, true); err != nil {
		return nil, err
	}
	if v == 0 && h.typ != CONNECT {
		return nil, protocolErr(h.typ.String() + " before CONNECT")
	}
	if err := checkFlags(h.typ, h.flags, v); err != nil {
		return nil, err
	}
	if d.reuse {
		d.reset()
	}
	c := cursor{b: body}
	v5 := v == V5
	var p Packet
	var err error
	switch h.typ {
	case CONNECT:
		p, err = d.connect(&c)
	case CONNACK:
		p, err = d.connack(&c, v5)
	case PUBLISH:
		p, err = d.publish(&c, h.flags, v5)
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		p, err = d.ack(&c, h.typ, v5)
	case SUBSCRIBE:
		p, err = d.subscribe(&c, v5)
	case SUBACK:
		p, err = d.suback(&c, v5)
	case UNSUBSCRIBE:
		p, err = d.unsubscribe(&c, v5)
	case UNSUBACK:
		p, err = d.unsuback(&c, v5)
	case PINGREQ:
		p, err = new(Pingreq), end(&c, "PINGREQ")
	case PINGRESP:
		p, err = new(Pingresp), end(&c, "PINGRESP")
	case DISCONNECT:
		p, err = d.disconnect(&c, v5)
	case AUTH:
		p, err = d.auth(&c)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// checkFlags enforces the fixed header flag bits of MQTT 5 §2.1.3 and 3.1.1
// §2.2.2 (PUBLISH flags are checked by publish).
func checkFlags(t Type, flags byte, v Version) error {
	switch t {
	case 0:
		return malformed("reserved packet type 0")
	case AUTH:
		if v != V5 {
			return malformed("packet type 15 is reserved before MQTT 5")
		}
	case PUBLISH:
		return nil
	case PUBREL, SUBSCRIBE, UNSUBSCRIBE:
		if flags != 0b0010 {
			return malformed(t.String() + ": fixed header flags must be 0010")
		}
		return nil
	}
	if flags != 0 {
		return malformed(t.String() + ": fixed header flags must be 0000")
	}
	return nil
}

// end checks that the packet has no bytes left over.
func end(c *cursor, what string) error {
	if c.left() != 0 {
		return malformed(what + ": unexpected bytes at end of packet")
	}
	return nil
}

func (d *decoder) connect(c *cursor) (Packet, error) {
	name, err := c.utf8("CONNECT: protocol name")
	if err != nil {
		return nil, err
	}
	level, err := c.u8("CONNECT: protocol level")
	if err != nil {
		return nil, err
	}
	switch string(name) {
	case "MQTT":
		if level != byte(V311) && level != byte(V5) {
			return nil, &Error{Code: UnsupportedProtocolVersion, Msg: "CONNECT: protocol level " + hexByte(level) + " of MQTT", kind: ErrUnsupportedVersion}
		}
	case "MQIsdp":
		if level != byte(V31) {
			return nil, &Error{Code: UnsupportedProtocolVersion, Msg: "CONNECT: protocol level " + hexByte(level) + " of MQIsdp", kind: ErrUnsupportedVersion}
		}
	default:
		return nil, protocolErr("CONNECT: unknown protocol name")
	}
	flags, err := c.u8("CONNECT: flags")
	if err != nil {
		return nil, err
	}
	p := new(Connect)
	p.Version = Version(level)
	if p.Version == V31 {
		p.ProtocolName = "MQIsdp"
	} else {
		p.ProtocolName = "MQTT"
	}
	v5 := p.Version == V5
	if flags&0x01 != 0 {
		return nil, malformed("CONNECT: reserved flag bit 0 set")
	}
	p.CleanStart = flags&0x02 != 0
	p.WillFlag = flags&0x04 != 0
	p.WillQoS = flags >> 3 & 3
	p.WillRetain = flags&0x20 != 0
	p.PasswordFlag = flags&0x40 != 0
	p.UsernameFlag = flags&0x80 != 0
	if p.WillQoS == 3 {
		return nil, malformed("CONNECT: will QoS 3")
	}
	if !p.WillFlag && (p.WillQoS != 0 || p.WillRetain) {
		return nil, malformed("CONNECT: will QoS or retain set without will flag")
	}
	if !v5 && p.PasswordFlag && !p.UsernameFlag {
		return nil, protocolErr("CONNECT: password flag without user name flag")
	}
	if p.KeepAlive, err = c.u16("CONNECT: keep alive"); err != nil {
		return nil, err
	}
	if v5 {
		if err := d.decodeProps(c, cConnect, &p.Props); err != nil {
			return nil, err
		}
	}
	if p.ClientID, err = c.str("CONNECT: client identifier"); err != nil {
		return nil, err
	}
	if p.WillFlag {
		if v5 {
			if err := d.decodeProps(c, ctxWill, &p.WillProps); err != nil {
				return nil, err
			}
		}
		topic, err := c.binary("CONNECT: will topic")
		if err != nil {
			return nil, err
		}
		if len(topic) == 0 {
			return nil, protocolErr("CONNECT: will topic: empty topic name")
		}
		if err := checkTopic(topic, "CONNECT: will topic"); err != nil {
			return nil, err
		}
		p.WillTopic = string(topic)
		if p.WillPayload, err = c.binary("CONNECT: will payload"); err != nil {
			return nil, err
		}
	}
	if p.UsernameFlag {
		if p.Username, err = c.str("CONNECT: user name"); err != nil {
			return nil, err
		}
	}
	if p.PasswordFlag {
		if p.Password, err = c.binary("CONNECT: password"); err != nil {
			return nil, err
		}
	}
	return p, end(c, "CONNECT")
}

func (d *decoder) connack(c *cursor, v5 bool) (Packet, error) {
	flags, err := c.u8("CONNACK: acknowledge flags")
	if err != nil {
		return nil, err
	}
	if flags&^1 != 0 {
		return nil, malformed("CONNACK: reserved acknowledge flag bits set")
	}
	b, err := c.u8("CONNACK: reason code")
	if err != nil {
		return nil, err
	}
	p := new(Connack)
	p.SessionPresent = flags == 1
	if v5 {
		p.ReasonCode = ReasonCode(b)
		if err := checkReason(CONNACK, p.ReasonCode); err != nil {
			return nil, err
		}
	} else {
		var ok bool
		if p.ReasonCode, ok = connackReason5(b); !ok {
			return nil, malformed("CONNACK: unknown return code " + hexByte(b))
		}
	}
	if p.SessionPresent && p.ReasonCode != Success {
		return nil, protocolErr("CONNACK: session present with a failure code")
	}
	if v5 {
		if err := d.decodeProps(c, cConnack, &p.Props); err != nil {
			return nil, err
		}
	}
	return p, end(c, "CONNACK")
}

func (d *decoder) publish(c *cursor, flags byte, v5 bool) (Packet, error) {
	qos := flags >> 1 & 3
	if qos == 3 {
		return nil, malformed("PUBLISH: QoS 3")
	}
	dup := flags&8 != 0
	if dup && qos == 0 {
		return nil, malformed("PUBLISH: DUP set on QoS 0")
	}
	topic, err := c.binary("PUBLISH: topic")
	if err != nil {
		return nil, err
	}
	if err := checkTopic(topic, "PUBLISH: topic"); err != nil {
		return nil, err
	}
	p := d.newPublish()
	p.Dup, p.QoS, p.Retain = dup, qos, flags&1 != 0
	if qos > 0 {
		if p.PacketID, err = c.u16("PUBLISH: packet identifier"); err != nil {
			return nil, err
		}
		if p.PacketID == 0 {
			return nil, protocolErr("PUBLISH: packet identifier 0")
		}
	}
	if v5 {
		if err := d.decodeProps(c, cPublish, &p.Props); err != nil {
			return nil, err
		}
	}
	if len(topic) == 0 && !(v5 && p.Props.Has(PropTopicAlias)) {
		return nil, protocolErr("PUBLISH: empty topic name without a topic alias")
	}
	switch {
	case !d.reuse:
		p.Topic = string(topic)
	case string(topic) == d.lastTopic:
		p.Topic = d.lastTopic
	default:
		p.Topic = string(topic)
		d.lastTopic = p.Topic
	}
	p.Payload = c.rest()
	return p, nil
}

// packetID reads a packet identifier that must not be zero (MQTT 5 §2.2.1).
func packetID(c *cursor, t Type) (uint16, error) {
	if c.left() < 2 {
		return 0, overrun(t.String() + ": packet identifier")
	}
	id, _ := c.u16("")
	if id == 0 {
		return 0, protocolErr(t.String() + ": packet identifier 0")
	}
	return id, nil
}

// reasonAndProps reads the optional reason code and properties that close
// the MQTT 5 acks, DISCONNECT and AUTH: both may be omitted (Success, no
// properties) and the properties may be omitted alone.
func (d *decoder) reasonAndProps(c *cursor, t Type, rc *ReasonCode, props *Properties) error {
	if c.left() == 0 {
		return nil
	}
	b, _ := c.u8("reason code")
	*rc = ReasonCode(b)
	if err := checkReason(t, *rc); err != nil {
		return err
	}
	if c.left() > 0 {
		if err := d.decodeProps(c, ctxOf(t), props); err != nil {
			return err
		}
	}
	return end(c, t.String())
}

func (d *decoder) ack(c *cursor, t Type, v5 bool) (Packet, error) {
	id, err := packetID(c, t)
	if err != nil {
		return nil, err
	}
	p := d.newAck()
	p.Kind, p.PacketID = t, id
	if !v5 {
		return p, end(c, t.String())
	}
	return p, d.reasonAndProps(c, t, &p.ReasonCode, &p.Props)
}

func (d *decoder) subscribe(c *cursor, v5 bool) (Packet, error) {
	id, err := packetID(c, SUBSCRIBE)
	if err != nil {
		return nil, err
	}
	p := new(Subscribe)
	p.PacketID = id
	if v5 {
		if err := d.decodeProps(c, cSubscribe, &p.Props); err != nil {
			return nil, err
		}
	}
	start := len(d.subs)
	for c.left() > 0 {
		f, err := c.str("SUBSCRIBE: topic filter")
		if err != nil {
			return nil, err
		}
		o, err := c.u8("SUBSCRIBE: subscription options")
		if err != nil {
			return nil, err
		}
		s := Subscription{Filter: f, QoS: o & 3}
		if v5 {
			if o&0xc0 != 0 {
				return nil, malformed("SUBSCRIBE: reserved subscription option bits set")
			}
			s.NoLocal, s.RetainAsPublished, s.RetainHandling = o&4 != 0, o&8 != 0, o>>4&3
			if s.RetainHandling == 3 {
				return nil, protocolErr("SUBSCRIBE: retain handling 3")
			}
		} else if o&0xfc != 0 {
			return nil, malformed("SUBSCRIBE: reserved bits of requested QoS set")
		}
		if s.QoS == 3 {
			return nil, malformed("SUBSCRIBE: QoS 3")
		}
		d.subs = append(d.subs, s)
	}
	if len(d.subs) == start {
		return nil, protocolErr("SUBSCRIBE: no topic filters")
	}
	p.Subs = d.subs[start:len(d.subs):len(d.subs)]
	return p, nil
}

func (d *decoder) suback(c *cursor, v5 bool) (Packet, error) {
	id, err := packetID(c, SUBACK)
	if err != nil {
		return nil, err
	}
	p := new(Suback)
	p.PacketID = id
	if v5 {
		if err := d.decodeProps(c, cSuback, &p.Props); err != nil {
			return nil, err
		}
	}
	start := len(d.codes)
	for c.left() > 0 {
		b, _ := c.u8("SUBACK: reason code")
		rc := ReasonCode(b)
		if v5 {
			if err := checkReason(SUBACK, rc); err != nil {
				return nil, err
			}
		} else {
			var ok bool
			if rc, ok = subackReason5(b); !ok {
				return nil, malformed("SUBACK: unknown return code " + hexByte(b))
			}
		}
		d.codes = append(d.codes, rc)
	}
	if len(d.codes) == start {
		return nil, protocolErr("SUBACK: no reason codes")
	}
	p.Codes = d.codes[start:len(d.codes):len(d.codes)]
	return p, nil
}

func (d *decoder) unsubscribe(c *cursor, v5 bool) (Packet, error) {
	id, err := packetID(c, UNSUBSCRIBE)
	if err != nil {
		return nil, err
	}
	p := new(Unsubscribe)
	p.PacketID = id
	if v5 {
		if err := d.decodeProps(c, cUnsub, &p.Props); err != nil {
			return nil, err
		}
	}
	start := len(d.filters)
	for c.left() > 0 {
		f, err := c.str("UNSUBSCRIBE: topic filter")
		if err != nil {
			return nil, err
		}
		d.filters = append(d.filters, f)
	}
	if len(d.filters) == start {
		return nil, protocolErr("UNSUBSCRIBE: no topic filters")
	}
	p.Filters = d.filters[start:len(d.filters):len(d.filters)]
	return p, nil
}

func (d *decoder) unsuback(c *cursor, v5 bool) (Packet, error) {
	id, err := packetID(c, UNSUBACK)
	if err != nil {
		return nil, err
	}
	p := new(Unsuback)
	p.PacketID = id
	if !v5 {
		return p, end(c, "UNSUBACK")
	}
	if err := d.decodeProps(c, cUnsuback, &p.Props); err != nil {
		return nil, err
	}
	start := len(d.codes)
	for c.left() > 0 {
		b, _ := c.u8("UNSUBACK: reason code")
		if err := checkReason(UNSUBACK, ReasonCode(b)); err != nil {
			return nil, err
		}
		d.codes = append(d.codes, ReasonCode(b))
	}
	if len(d.codes) == start {
		return nil, protocolErr("UNSUBACK: no reason codes")
	}
	p.Codes = d.codes[start:len(d.codes):len(d.codes)]
	return p, nil
}

func (d *decoder) disconnect(c *cursor, v5 bool) (Packet, error) {
	p := new(Disconnect)
	if !v5 {
		return p, end(c, "DISCONNECT")
	}
	return p, d.reasonAndProps(c, DISCONNECT, &p.ReasonCode, &p.Props)
}

func (d *decoder) auth(c *cursor) (Packet, error) {
	p := new(Auth)
	return p, d.reasonAndProps(c, AUTH, &p.ReasonCode, &p.Props)
}
