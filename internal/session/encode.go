package session

import (
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// encode appends the bytes of items to buf. It reports the number of
// packets, the packet ids of deliveries the client cannot accept (over its
// Maximum Packet Size: see discardTooLarge) and whether the final packet of
// the connection is among them. sh (nil: none) is the encoding the
// subscribers of a fan-out share within one flush.
func (c *Conn) encode(buf []byte, items []outItem, now time.Time, sh *sharedPublish) (out []byte, packets int, tooLarge []uint16, final bool) {
	var ack packet.Ack
	for i := range items {
		it := &items[i]
		if it.final {
			final = true
		}
		start := len(buf)
		var err error
		switch {
		case it.isPub:
			var ok bool
			buf, ok = c.appendPublish(buf, &it.d, it.dup, now, sh)
			if !ok {
				c.env.Metrics.Drop(metrics.DropTooLarge, 1)
				if it.d.QoS > 0 {
					tooLarge = append(tooLarge, it.d.pid)
				}
				continue
			}
			c.env.Metrics.MessagesOut[it.d.QoS].Inc()
		case it.isAck:
			ack = packet.Ack{Kind: it.ack.Kind, PacketID: it.ack.PacketID, ReasonCode: it.ack.ReasonCode}
			buf, err = ack.Append(buf, c.version)
			if err != nil {
				c.logger().Error("cannot encode acknowledgement", "err", err)
				buf = buf[:start]
				continue
			}
		default:
			buf, err = it.p.Append(buf, c.version)
			if err != nil {
				c.logger().Error("cannot encode packet", "packet", packet.Describe(it.p), "err", err)
				buf = buf[:start]
				continue
			}
		}
		packets++
	}
	c.env.Metrics.PacketsOut.Add(float64(packets))
	return buf, packets, tooLarge, final
}

// discardTooLarge ends the flows of messages the client cannot accept: a
// message over its Maximum Packet Size is discarded as if delivered.
func (c *Conn) discardTooLarge(pids []uint16) {
	for _, p := range pids {
		_ = c.completeOutbound(&packet.Ack{Kind: ackKindFor(c, p), PacketID: p})
	}
}

// estimateSize is about the bytes a message takes on the wire, for
// bounding a batch before it is encoded.
func estimateSize(m *message.Message) int {
	return 16 + len(m.Topic) + len(m.Payload)
}

// sharedPublish lets the subscribers of a fan-out share one encoding of a
// message within one flush of a batch (see batch.go), where their writes
// come one after another: the second connection to encode a message in
// the same form keeps a copy, and the ones after it copy those bytes and
// patch the packet id, DUP and RETAIN. The form is the protocol version and
// QoS; messages with properties that differ per subscriber (subscription
// identifiers, topic aliases, the remaining expiry) are never shared. It
// remembers the last few messages, as a read may bring several and each
// subscriber's write then holds them all.
type sharedPublish struct {
	e    [sharedEntries]sharedEntry
	next int // the entry to reuse next
}

const sharedEntries = 8

type sharedEntry struct {
	m     *message.Message
	form  byte
	kept  bool   // b holds the encoding
	b     []byte // the encoding, DUP and RETAIN clear
	pidAt int    // offset of the packet id in b (QoS > 0)
}

func (sh *sharedPublish) find(m *message.Message, form byte) *sharedEntry {
	for i := range sh.e {
		if e := &sh.e[i]; e.m == m && e.form == form {
			return e
		}
	}
	return nil
}

// shareable reports whether d's encoding is the same for every connection
// of its protocol version that receives it at its QoS.
func (c *Conn) shareable(d *Delivery) bool {
	return c.version != packet.V5 || (len(d.IDs) == 0 && c.clientAliasMax == 0 && d.Msg.Expiry.IsZero())
}

// appendShared appends the shared encoding of d if sh holds it; it
// reports false when it does not, or when the client's Maximum Packet
// Size must judge the packet (the ordinary path reports that).
func (sh *sharedPublish) appendShared(buf []byte, c *Conn, d *Delivery, dup bool) ([]byte, bool) {
	e := sh.find(d.Msg, formOf(c.version, d.QoS))
	if e == nil || !e.kept || (c.clientMaxPacket > 0 && uint32(len(e.b)) > c.clientMaxPacket) {
		return buf, false
	}
	start := len(buf)
	buf = append(buf, e.b...)
	if dup && d.QoS > 0 {
		buf[start] |= 0x08
	}
	if d.Retain {
		buf[start] |= 0x01
	}
	if d.QoS > 0 {
		buf[start+e.pidAt] = byte(d.pid >> 8)
		buf[start+e.pidAt+1] = byte(d.pid)
	}
	return buf, true
}

// note records that enc was just encoded for d: the second time the same
// message is encoded in the same form, the encoding is kept for the
// connections after it.
func (sh *sharedPublish) note(c *Conn, d *Delivery, enc []byte) {
	form := formOf(c.version, d.QoS)
	e := sh.find(d.Msg, form)
	if e == nil {
		e = &sh.e[sh.next]
		sh.next = (sh.next + 1) % sharedEntries
		e.m, e.form, e.kept = d.Msg, form, false
		return
	}
	if e.kept {
		return
	}
	e.b = append(e.b[:0], enc...)
	e.b[0] &^= 0x09 // DUP and RETAIN are patched per connection
	// Fixed header (type and flags, remaining length as a varint), then the
	// topic (length-prefixed), then the packet id.
	h := 1
	for h < len(e.b) && e.b[h]&0x80 != 0 {
		h++
	}
	e.pidAt = h + 1 + 2 + len(d.Msg.Topic)
	e.kept = true
}

// reset forgets the shared encodings (the flush they belong to is over),
// and the messages they refer to.
func (sh *sharedPublish) reset() {
	for i := range sh.e {
		e := &sh.e[i]
		e.m, e.kept = nil, false
		if cap(e.b) > maxBatchBytes {
			e.b = nil
		}
	}
	sh.next = 0
}

func formOf(v packet.Version, qos byte) byte { return byte(v)<<2 | qos }

// appendPublish encodes a delivery for this connection: topic alias, the
// remaining expiry, subscription ids. It reports false (and appends
// nothing) when the packet exceeds the client's Maximum Packet Size.
func (c *Conn) appendPublish(buf []byte, d *Delivery, dup bool, now time.Time, sh *sharedPublish) ([]byte, bool) {
	share := sh != nil && c.shareable(d)
	if share {
		if out, ok := sh.appendShared(buf, c, d, dup); ok {
			return out, true
		}
	}
	m := d.Msg
	pub := &packet.Publish{Topic: m.Topic, QoS: d.QoS, Retain: d.Retain, Dup: dup && d.QoS > 0, PacketID: d.pid, Payload: m.Payload}
	newAlias := uint16(0)
	if c.version == packet.V5 {
		pr := &pub.Props
		if m.PayloadFormat != 0 {
			pr.SetPayloadFormat(m.PayloadFormat)
		}
		if m.ContentType != "" {
			pr.SetContentType(m.ContentType)
		}
		if m.ResponseTopic != "" {
			pr.SetResponseTopic(m.ResponseTopic)
		}
		if len(m.CorrelationData) > 0 {
			pr.SetCorrelationData(m.CorrelationData)
		}
		if len(m.User) > 0 {
			pr.User = userProps(m.User)
		}
		if v, ok := m.ExpiryInterval(now); ok {
			pr.SetMessageExpiry(v)
		}
		pr.SubscriptionIDs = d.IDs
		if c.clientAliasMax > 0 {
			if a, ok := c.aliasOut[m.Topic]; ok {
				pr.SetTopicAlias(a)
				pub.Topic = ""
			} else if c.nextAlias < c.clientAliasMax {
				c.nextAlias++
				newAlias = c.nextAlias
				if c.aliasOut == nil {
					c.aliasOut = map[string]uint16{}
				}
				c.aliasOut[m.Topic] = newAlias
				pr.SetTopicAlias(newAlias)
			}
		}
	}
	start := len(buf)
	out, err := pub.Append(buf, c.version)
	if err != nil || (c.clientMaxPacket > 0 && uint32(len(out)-start) > c.clientMaxPacket) {
		if newAlias != 0 {
			delete(c.aliasOut, m.Topic)
			c.nextAlias--
		}
		if err != nil {
			c.logger().Error("cannot encode PUBLISH", "topic", m.Topic, "err", err)
		}
		return out[:start], false
	}
	if share {
		sh.note(c, d, out[start:])
	}
	return out, true
}

func userProps(u []message.UserProperty) []packet.UserProperty {
	out := make([]packet.UserProperty, len(u))
	for i, p := range u {
		out[i] = packet.UserProperty{Key: p.Key, Value: p.Value}
	}
	return out
}
