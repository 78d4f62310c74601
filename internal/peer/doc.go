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
//   - forwarded publishes, batched: many messages per frame and per write,
//     from this node's outbox for the peer (below), acknowledged.
//   - retained updates, and a full retained sync after each connection.
//   - requests and responses with ids (Call, with a context) and one-way
//     notifications (Notify), served by Handler.Serve in their own
//     goroutines (at most Options.MaxRequests at once).
//   - reach: which peers this node hears from and can send to, announced on
//     every new connection and on every change; transit (below) uses it.
//
// Wire: a connection opens with the Kind byte (so one listener can be
// shared through a Mux), then TLS if configured, then a hello frame (from,
// to, protocol version, incarnation) answered by a hello-ack or a reject.
// Every frame is a 4-byte big-endian length, a type byte and a body (see
// frame.go).
//
// Who dials: of two nodes, the one with the smaller id dials and the other
// only accepts, so a pair never opens two links. When the dialler reconnects
// while the acceptor still holds the old connection (a restart, or a
// failure only the dialler noticed), the acceptor replaces the old
// connection with the new one. A dialler retries with exponential backoff
// from BackoffMin to BackoffMax, jittered by a seeded source.
//
// Acknowledged forwarding (outbox.go, inbox.go, receive.go). Each peer has
// an outbox: this node's stream of forwarded messages to it, kept across
// connections and paths. QoS 1/2 messages are numbered within the outbox's
// epoch (this process's incarnation, and the outbox's generation: a peer
// removed and added again gets a new one), stay in the outbox once sent,
// and leave it when the peer acknowledges them: the receiver acknowledges
// cumulatively (everything up to n of an epoch) after the handler returned
// for them. A new path or a new connection sends the unacknowledged ones
// again, oldest first; the receiver delivers only the next number
// (go-back-N: duplicates and messages past a gap are skipped, and the gap
// is filled by the resend), so a link that breaks or reconnects while both
// nodes live loses and duplicates nothing, and each peer's messages keep
// their order. QoS 0 messages are not acknowledged: they leave the outbox
// when sent, and are numbered in a sequence of their own only so that one
// held up on an old path is dropped rather than delivered after a later
// one. Deduplication is by (origin node, epoch, number); a receiver that
// sees a peer with a new incarnation counts what it had seen numbered and
// never got (sextant_peer_lost_messages_total{reason="origin_restarted"}).
//
// Transit (path.go). A peer's outbox goes on the direct link while that
// link is usable: connected, something arrived within StallTimeout, and
// the peer's reach announcement says it hears this node (which catches a
// one-way cut). When it is not, the outbox goes through a transit node: a
// peer with a usable link that announced it can send to the destination,
// the one with the lowest estimated round trip through it (Config.Estimate,
// network coordinates). The transit node passes the frames on over its own
// direct link and never further: a frame that did not come from its origin
// is dropped (no loops, one extra hop at most). Acknowledgements travel
// back the same way, end to end between origin and destination, so the
// outbox covers both paths; a transit node that drops frames (its transit
// queue full, its link gone) costs a resend after ResendAfter. An origin
// keeps at most TransitWindow bytes of QoS 1/2 messages unacknowledged on
// a transit path, so that it does not overrun the transit node's queue. Retained
// updates for an unreachable peer take the transit path too (last writer
// wins makes duplicates harmless); requests, responses and interest stay
// on the direct link. As soon as the direct link is usable again, the
// outbox goes back to it. The peer's interest is the last one it
// announced while the direct link is down (the cluster layer keeps it
// until membership says the peer failed).
//
// Queues and their overflow policies (each is bounded):
//   - a peer's outbox: at most QueueMessages and QueueBytes, counting the
//     messages waiting to be sent and those sent and not yet acknowledged.
//     When full, the oldest waiting QoS 0 message is dropped; if there is
//     none, a new QoS 0 message is dropped, and a new QoS 1/2 message blocks
//     its publisher up to BlockTimeout while the peer has a path (then is
//     dropped) or is dropped at once while it has none. A message once in
//     the outbox leaves it only when acknowledged (QoS 1/2), sent (QoS 0),
//     or when the peer is removed (it failed or left: dropped and counted).
//     Every drop is counted in sextant_peer_dropped_messages_total by
//     reason.
//   - control frames (retained updates, requests, responses): per
//     connection, at most ControlBytes; overflowing it resets the
//     connection, which resynchronises interest and retained messages on
//     reconnection. Retained updates are not queued while a link is down
//     and no transit node reaches the peer: the sync on reconnection
//     replaces them.
//   - transit frames waiting on a connection: at most TransitBytes; beyond
//     it they are dropped and counted (sextant_peer_transit_dropped_total),
//     and their origin sends the messages again.
//
// Concurrency: a Manager and its Links are safe for concurrent use. Each
// link has one goroutine that connects and writes and, while connected, one
// reader goroutine; handler calls come from readers, in order per origin
// (one origin's messages may arrive on its direct link and on a transit
// node's: a mutex per origin serialises their delivery). The manager's
// route loop re-evaluates paths. A link's writer takes other links' locks
// one at a time (to drain the outboxes routed through it), never two at
// once. The Manager owns its accept loop, route loop, handshake goroutines
// and request handlers; Remove and Close stop a link's goroutines and wait for them, and
// Close waits for everything. Metrics go to the Registerer given in Config.
//
// This package knows nothing of MQTT, the broker or membership: the cluster
// package decides which links exist and what to send. It must not import
// them.
package peer
