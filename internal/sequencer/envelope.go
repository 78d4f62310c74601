package sequencer

import (
	"fmt"

	"github.com/sextantmq/sextant/internal/wire"
)

// Every record the sequencer appends carries its publish's QoS and dedup
// key in front of the message, so that the dedup table can be rebuilt from
// the log alone after a restart (doc.go, "Deduplication"):
//
//	envelope = version=1 | flags | [client str | packet id uvarint | nonce uvarint] | message (the rest)
//	flags    = bits 0-1 QoS | bit 3 key present; others 0
//
// The retain bit is the topic log's own.

const envelopeVersion = 1

// appendEnvelope appends p's envelope to dst.
func appendEnvelope(dst []byte, p *Publish) []byte {
	flags := p.QoS
	if p.Key.Valid() {
		flags |= flagKey
	}
	dst = append(dst, envelopeVersion, flags)
	if p.Key.Valid() {
		dst = appendKey(dst, p.Key)
	}
	return append(dst, p.Message...)
}

// envelopeLen is the length of p's envelope.
func envelopeLen(p *Publish) int {
	n := 2 + len(p.Message)
	if p.Key.Valid() {
		n += uvarintLen(uint64(len(p.Key.Client))) + len(p.Key.Client) + uvarintLen(uint64(p.Key.PacketID)) + uvarintLen(p.Key.Nonce)
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// envelope is a decoded record payload; message aliases the payload.
type envelope struct {
	qos     byte
	key     Key
	message []byte
}

// decodeEnvelope decodes a record's payload. Errors wrap ErrCorrupt: the
// sequencer wrote every record, and the log checked its checksum.
func decodeEnvelope(b []byte) (envelope, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != envelopeVersion && !d.Failed() {
		return envelope{}, fmt.Errorf("%w: record envelope version %d, want %d", ErrCorrupt, v, envelopeVersion)
	}
	flags := d.Byte()
	var e envelope
	if flags&^(flagQoS|flagKey) != 0 || flags&flagQoS > 2 {
		d.Fail()
	}
	e.qos = flags & flagQoS
	if flags&flagKey != 0 {
		e.key = decodeKey(&d)
		if !e.key.Valid() {
			d.Fail()
		}
	}
	e.message = d.Rest()
	if d.Failed() {
		return envelope{}, fmt.Errorf("%w: record envelope", ErrCorrupt)
	}
	return e, nil
}
