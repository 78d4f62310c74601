// Package packettest holds annotated MQTT 3.1.1 and 5.0 byte vectors shared
// by the codec, session and server tests: for each, the bytes (written as
// commented hex), the protocol version, and either the packet value it
// decodes to or the error sentinel and reason code it must be rejected with.
//
// It is plain data plus a hex parser; it imports only internal/mqtt/packet.
// Every call to Valid or Invalid builds fresh values, so a test may modify
// what it gets. Nothing here does I/O or keeps state.
package packettest
