// Package packet is Sextant's MQTT 3.1.1 and 5.0 codec: the 15 control packet
// types, every MQTT 5 property and reason code, and the specifications'
// validity rules. It knows nothing of connections, sessions or brokers: it
// turns bytes into packet values and packet values into bytes.
//
// # Decoding
//
// A Reader decodes a stream. It enforces the maximum packet size from the
// fixed header, before it reads or buffers the body, and does its own
// buffering in one buffer that starts small and grows only as a large
// packet's bytes actually arrive. Decode decodes one packet from a byte
// slice.
//
// Validity rule for decoded values: a packet returned by Reader.Next, and
// every byte slice and slice of it (Payload, Password, WillPayload,
// CorrelationData, AuthData, User, SubscriptionIDs, Subs, Codes, Filters),
// may alias the Reader's buffer or reused storage, and is valid only until
// the next call to Next. Strings are copies and stay valid. Callers that
// keep a packet past that point copy what they keep (for example the
// payload). Packets returned by Decode are freshly allocated, but their byte
// slices alias the input.
//
// Every violation of a normative rule the codec can see in one packet is an
// error wrapping ErrMalformed or ErrProtocol (or ErrTooLarge,
// ErrUnsupportedVersion, ErrTopicAlias) and carrying the reason code a server
// answers with (CodeOf). Rules that need connection state (a second CONNECT,
// topic alias maxima, Receive Maximum, which side may send what) belong to
// the session; topic filter syntax belongs to internal/topic.
//
// # Encoding
//
// Append encodes a packet for a protocol version, appending to a caller's
// buffer without allocating when it has room. It validates the packet first
// and encodes only valid packets. Properties are written when their Present
// bit is set (User and SubscriptionIDs when non-empty), and only for MQTT 5:
// for 3.1 and 3.1.1 they are left out, so a message received from an MQTT 5
// client can be forwarded to a 3.1.1 one unchanged.
//
// # Versions and reason codes
//
// MQTT 3.1 ("MQIsdp", level 3) is decoded and encoded with the 3.1.1 rules,
// which are a superset of it on the wire. Reason codes are always MQTT 5
// values. When a packet is encoded for 3.1.1 the codec maps them to the 3.1.1
// return codes (for example SUBACK failures become 0x80), and decoding 3.1.1
// maps back, so the layers above speak one vocabulary.
//
// # Contract
//
// This package is a pure core: no I/O beyond the io.Reader it is handed, no
// clock, no goroutines, no package state. It is safe for concurrent use
// except for a Reader, which belongs to one goroutine. Test vectors live in
// internal/mqtt/packettest.
package packet
