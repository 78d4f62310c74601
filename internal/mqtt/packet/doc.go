// Package packet is Sextant's MQTT 3.1.1 and 5.0 codec: the 15 control packet
// types, every MQTT 5 property and reason code, and the specifications'
// validity rules. It knows nothing of connections, sessions or brokers: it
// turns bytes into packet values and packet values into bytes.
//
// Decoding is done by a Reader, which enforces the maximum packet size before
// allocating and reuses one buffer; a decoded PUBLISH's Payload (and other
// byte slices) alias that buffer and are valid only until the next call to
// Reader.Next. Callers that keep a payload copy it.
//
// Reason codes are always MQTT 5 values. When a packet is encoded for 3.1.1
// the codec maps them to the 3.1.1 return codes (for example SUBACK failures
// become 0x80), and decoding 3.1.1 maps back, so the layers above speak one
// vocabulary.
//
// This package is a pure core: no I/O beyond the io.Reader it is handed, no
// clock, no goroutines. It is safe for concurrent use except for a Reader,
// which belongs to one goroutine.
package packet
