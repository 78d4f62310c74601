// Package mqttclient is Sextant's MQTT 3.1.1 and 5.0 client: the client
// side of one connection, built on the codec in internal/mqtt/packet. The
// command-line tools (pub, sub, ping) and the load generator (internal/bench)
// use it to talk to any MQTT broker; it knows nothing of Sextant's broker
// internals.
//
// # What it owns
//
// A Client is one network connection to a broker and the client half of the
// MQTT session on it: the CONNECT/CONNACK handshake (will, credentials, MQTT
// 5 properties), keepalive pings, packet identifiers, the QoS 1 and 2
// exchanges in both directions, an in-flight window that respects the
// server's Receive Maximum, SUBSCRIBE/UNSUBSCRIBE, and topic aliases in both
// directions when enabled. Transports are TCP, TLS and WebSocket (Dial takes
// mqtt://, mqtts://, ws:// and wss:// URLs).
//
// A Client does not reconnect and does not store messages: when the
// connection ends, publishes still waiting for their acknowledgement fail
// with an error wrapping ErrConnectionLost (or ErrClosed), and the caller
// decides what to do. A persistent session (Options.KeepSession) survives on
// the broker, so a new Client with the same client id receives what was
// queued for it.
//
// # Goroutines and concurrency
//
// Each Client runs exactly two goroutines, both owned by it and both stopped
// and waited for by Close and Disconnect:
//
//   - the reader decodes packets (zero-copy, with packet.Reader), calls
//     Options.OnPublish for each inbound PUBLISH, completes acknowledged
//     publishes, and queues the acknowledgements it owes;
//   - the writer sends everything queued, many packets per write, and sends
//     PINGREQ when the connection has been idle for three quarters of the
//     keepalive interval. It fails the connection when a ping goes
//     unanswered for a whole interval.
//
// Publishers encode their packets on their own goroutine into a shared
// outbound buffer (so a caller may reuse its payload as soon as Publish or
// PublishAsync returns), and the writer swaps that buffer for an empty one
// and writes it whole: writes are batched under load and immediate when idle.
// The buffer is bounded (Options.MaxPending): a publisher blocks, with its
// context, while it is full. Acknowledgements queued by the reader are never
// blocked, so the reader cannot deadlock against a broker that is itself
// waiting for us to read.
//
// All exported methods are safe for concurrent use. Callbacks (OnPublish and
// the done functions of PublishAsync) run on the reader goroutine or on the
// goroutine that observed the connection's end; they must not block for long
// and must not call Close or Disconnect (which wait for the reader).
//
// Time comes from Options.Clock (the real clock by default), so tests can
// run a Client inside a testing/synctest bubble.
//
// It must not import the broker's packages (session, broker, node): it is a
// client of any broker, and its tests run against Sextant and Mosquitto alike.
package mqttclient
