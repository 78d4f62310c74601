package sequencer

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
	"github.com/sextantmq/sextant/internal/wire"
)

// A command is one Raft entry's payload:
//
//	command   = version=1 | kind | body
//	publish   (kind 'P') = count uvarint (1..MaxPublishes) | count × item
//	item      = flags | topic str | [client str | packet id uvarint | nonce uvarint] | message bytes
//	flags     = bits 0-1 QoS (0, 1, 2) | bit 2 retain | bit 3 key present; others 0
//	retention (kind 'R') = max records per topic uvarint | max bytes uvarint | max age uvarint (ns)
//
// where str and bytes are a uvarint length and the bytes.

// CommandVersion is the version of the command encoding.
const CommandVersion = 1

// Kind is a command's kind.
type Kind byte

// Kinds.
const (
	// KindPublish: a batch of publishes, sequenced in order.
	KindPublish Kind = 'P'
	// KindRetention: a retention tick, applied at the entry's time (the
	// leader's), so every replica deletes the same segments.
	KindRetention Kind = 'R'
)

// Limits of a command.
const (
	// MaxPublishes bounds the publishes of one command.
	MaxPublishes = 1 << 16
	// MaxClientIDLen is the longest client id (MQTT's string limit).
	MaxClientIDLen = 1<<16 - 1
)

const (
	flagQoS    = 0x03
	flagRetain = 0x04
	flagKey    = 0x08
)

// Key identifies a publish for deduplication: the publisher's client id,
// the packet id of its PUBLISH and a nonce the access node chose when it
// first received that PUBLISH (an HLC stamp) and reuses when it retries it.
// A Key with PacketID 0 is no key: the publish is never deduplicated (QoS
// 0 publishes have no packet id).
type Key struct {
	Client   string
	PacketID uint16
	Nonce    uint64
}

// Valid reports whether k is a key (PacketID not 0).
func (k Key) Valid() bool { return k.PacketID != 0 }

// Publish is one message to sequence.
type Publish struct {
	Topic string
	// Message is the encoded message (message.Message's encoding); the
	// sequencer stores it as is.
	Message []byte
	Retain  bool
	QoS     byte
	Key     Key
}

// Command is a decoded command.
type Command struct {
	Kind      Kind
	Publishes []Publish          // KindPublish
	Retention topiclog.Retention // KindRetention
}

// PublishCommand returns the command sequencing ps, in order.
func PublishCommand(ps ...Publish) Command { return Command{Kind: KindPublish, Publishes: ps} }

// RetentionCommand returns a retention tick applying r.
func RetentionCommand(r topiclog.Retention) Command {
	return Command{Kind: KindRetention, Retention: r}
}

// Validate checks a command.
func (c Command) Validate() error {
	switch c.Kind {
	case KindPublish:
		if len(c.Publishes) == 0 || len(c.Publishes) > MaxPublishes {
			return fmt.Errorf("%w: %d publishes, want 1 to %d", ErrInvalid, len(c.Publishes), MaxPublishes)
		}
		for i := range c.Publishes {
			if err := c.Publishes[i].validate(); err != nil {
				return fmt.Errorf("publish %d: %w", i, err)
			}
		}
		return nil
	case KindRetention:
		r := c.Retention
		if r.MaxBytes < 0 || r.MaxAge < 0 {
			return fmt.Errorf("%w: negative retention bound", ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown command kind %d", ErrInvalid, byte(c.Kind))
}

func (p *Publish) validate() error {
	switch {
	case len(p.Topic) == 0 || len(p.Topic) > topiclog.MaxTopicLen:
		return fmt.Errorf("%w: topic of %d bytes", ErrInvalid, len(p.Topic))
	case p.QoS > 2:
		return fmt.Errorf("%w: QoS %d", ErrInvalid, p.QoS)
	case len(p.Key.Client) > MaxClientIDLen:
		return fmt.Errorf("%w: client id of %d bytes", ErrInvalid, len(p.Key.Client))
	case p.QoS == 0 && p.Key.Valid():
		return fmt.Errorf("%w: a QoS 0 publish has no packet id", ErrInvalid)
	case !p.Key.Valid() && (p.Key.Client != "" || p.Key.Nonce != 0):
		return fmt.Errorf("%w: key without a packet id", ErrInvalid)
	}
	return nil
}

// EncodeCommand encodes a valid command.
func EncodeCommand(c Command) ([]byte, error) {
	return AppendCommand(make([]byte, 0, commandLen(c)), c)
}

// commandLen is c's encoded length (with a valid c), so that a batch of
// publishes is encoded into one buffer instead of growing one.
func commandLen(c Command) int {
	n := 2 + binary.MaxVarintLen64
	for i := range c.Publishes {
		p := &c.Publishes[i]
		// flags, topic, key and message: the envelope (version, flags,
		// key, message) less its version, plus the two lengths.
		n += envelopeLen(p) - 1 + uvarintLen(uint64(len(p.Topic))) + len(p.Topic) + uvarintLen(uint64(len(p.Message)))
	}
	if c.Kind == KindRetention {
		n += 3 * binary.MaxVarintLen64
	}
	return n
}

// AppendCommand appends the encoding of a valid command to dst.
func AppendCommand(dst []byte, c Command) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return dst, err
	}
	dst = append(dst, CommandVersion, byte(c.Kind))
	switch c.Kind {
	case KindPublish:
		dst = binary.AppendUvarint(dst, uint64(len(c.Publishes)))
		for i := range c.Publishes {
			p := &c.Publishes[i]
			flags := p.QoS
			if p.Retain {
				flags |= flagRetain
			}
			if p.Key.Valid() {
				flags |= flagKey
			}
			dst = append(dst, flags)
			dst = wire.AppendString(dst, p.Topic)
			if p.Key.Valid() {
				dst = appendKey(dst, p.Key)
			}
			dst = wire.AppendBytes(dst, p.Message)
		}
	case KindRetention:
		r := c.Retention
		dst = binary.AppendUvarint(dst, r.MaxRecordsPerTopic)
		dst = binary.AppendUvarint(dst, uint64(r.MaxBytes))
		dst = binary.AppendUvarint(dst, uint64(r.MaxAge))
	}
	return dst, nil
}

func appendKey(dst []byte, k Key) []byte {
	dst = wire.AppendString(dst, k.Client)
	dst = binary.AppendUvarint(dst, uint64(k.PacketID))
	return binary.AppendUvarint(dst, k.Nonce)
}

// DecodeCommand decodes and validates a command. The publishes' topics,
// client ids and messages are copies (the command's bytes are not kept).
// Errors wrap ErrInvalid.
func DecodeCommand(b []byte) (Command, error) { return decodeCommand(b, true) }

// decodeCommand decodes a command; without copy its messages alias b (Apply
// copies them into the log's batch and keeps nothing).
func decodeCommand(b []byte, copyBytes bool) (Command, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != CommandVersion && !d.Failed() {
		return Command{}, fmt.Errorf("%w: command version %d, want %d", ErrInvalid, v, CommandVersion)
	}
	c := Command{Kind: Kind(d.Byte())}
	switch c.Kind {
	case KindPublish:
		// An item takes at least 3 bytes: flags, topic length, message length.
		n := d.Count(3)
		if n == 0 || n > MaxPublishes {
			d.Fail()
		}
		if !d.Failed() {
			c.Publishes = make([]Publish, n)
		}
		// The publishes of a batch mostly share their topic and client
		// id: one string each for a run of equal ones, not one per publish.
		var topic, client string
		for i := 0; i < n && !d.Failed(); i++ {
			p := &c.Publishes[i]
			flags := d.Byte()
			if flags&^(flagQoS|flagRetain|flagKey) != 0 {
				d.Fail()
			}
			p.QoS, p.Retain = flags&flagQoS, flags&flagRetain != 0
			if b := d.Bytes(); string(b) != topic {
				topic = string(b)
			}
			p.Topic = topic
			if flags&flagKey != 0 {
				p.Key = decodeKeyLike(&d, client)
				client = p.Key.Client
				if !p.Key.Valid() {
					d.Fail()
				}
			}
			if copyBytes {
				p.Message = d.BytesCopy()
			} else {
				p.Message = d.Bytes()
			}
		}
	case KindRetention:
		c.Retention.MaxRecordsPerTopic = d.Uvarint()
		c.Retention.MaxBytes = decodeInt64(&d)
		c.Retention.MaxAge = time.Duration(decodeInt64(&d))
	default:
		if !d.Failed() {
			return Command{}, fmt.Errorf("%w: unknown command kind %d", ErrInvalid, byte(c.Kind))
		}
	}
	if err := d.Finish(); err != nil {
		return Command{}, fmt.Errorf("%w: command: %w", ErrInvalid, err)
	}
	if err := c.Validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}

func decodeKey(d *wire.Decoder) Key { return decodeKeyLike(d, "") }

// decodeKeyLike decodes a key whose client id is likely to equal client,
// and then shares its string.
func decodeKeyLike(d *wire.Decoder, client string) Key {
	k := Key{Client: client}
	if b := d.Bytes(); string(b) != client {
		k.Client = string(b)
	}
	pid := d.Uvarint()
	if pid > math.MaxUint16 {
		d.Fail()
	}
	k.PacketID = uint16(pid)
	k.Nonce = d.Uvarint()
	return k
}

func decodeInt64(d *wire.Decoder) int64 {
	v := d.Uvarint()
	if v > math.MaxInt64 {
		d.Fail()
		return 0
	}
	return int64(v)
}
