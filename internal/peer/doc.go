// Package peer owns node-to-node links: one long-lived connection per pair
// of nodes, its framing, its queues and its reconnection. It carries four
// kinds of traffic, multiplexed on the one connection:
//
//   - interest: this node's aggregated subscription filters. On every new
//     connection the writer first sends a full snapshot with its version,
//     then deltas (from version, to version) as the set changes; the reader
//     checks that deltas follow each other and closes the connection if not
//     (the reconnection resynchronises). Interest is never queued: the writer
//     pulls what changed since the version it last sent, so a burst of
//     changes costs one frame and nothing can overflow. Filters are
//     reference counted (AddInterest: +1 or -1 per local subscription;
//     the node's one such count) so that reports that race still end in
//     the right state.
//   - forwarded publishes, batched: many messages per frame and per write.
//   - retained updates, and a full retained sync after each connection.
//   - requests and responses with ids (Call, with a context) and one-way
//     notifications (Notify), served by Handler.Serve in their own
//     goroutines (at most Options.MaxRequests at once).
//
// Wire: a connection opens with the Kind byte (so one listener can be
// shared through a Mux), then TLS if configured, then a hello frame (from,
// to, protocol version) answered by a hello-ack or a reject. Every frame is
// a 4-byte big-endian length, a type byte and a body (see frame.go).
//
// Who dials: of two nodes, the one with the smaller id dials and the other
// only accepts, so a pair never opens two links. When the dialler reconnects
// while the acceptor still holds the old connection (a restart, or a
// failure only the dialler noticed), the acceptor replaces the old
// connection with the new one. A dialler retries with exponential backoff
// from BackoffMin to BackoffMax, jittered by a seeded source.
//
// Queues and their overflow policies (each is bounded):
//   - forwarded messages: per link, at most QueueMessages and QueueBytes,
//     kept across reconnections. When full, the oldest queued QoS 0 message
//     is dropped; if there is none, a new QoS 0 message is dropped, and a
//     new QoS 1/2 message blocks its publisher up to BlockTimeout while the
//     link is connected (then is dropped) or is dropped at once while it is
//     not. Every drop is counted in sextant_peer_dropped_messages_total by
//     reason. A removed link's queue is dropped and counted.
//   - control frames (retained updates, requests, responses): per
//     connection, at most ControlBytes; overflowing it resets the
//     connection, which resynchronises interest and retained messages on
//     reconnection. Retained updates are not queued while a link is down:
//     the sync on reconnection replaces them.
//
// Nothing is acknowledged at this layer: messages written to a connection
// that then fails may be lost. QoS across nodes is the access node's
// acknowledgement (see docs/design/cluster.md).
//
// Concurrency: a Manager and its Links are safe for concurrent use. Each
// link has one goroutine that connects and writes and, while connected, one
// reader goroutine; handler calls for a link come from its reader, in order.
// The Manager owns its accept loop, handshake goroutines and request
// handlers; Remove and Close stop a link's goroutines and wait for them, and
// Close waits for everything. Metrics go to the Registerer given in Config.
//
// This package knows nothing of MQTT, the broker or membership: the cluster
// package decides which links exist and what to send. It must not import
// them.
package peer
