// Package cluster is a node's cluster layer for direct topics: it
// implements broker.Cluster on top of peer links (package peer) and cluster
// membership (package membership, or anything with its Members/Events).
// docs/design/cluster.md describes the semantics; in short:
//
//   - Interest routing: peers' announced filters are kept in a
//     router.Index keyed by node id. Forward sends a message once to each
//     node with matching non-shared interest, and each matching shared group
//     that had no member on the publisher's node to exactly one node with
//     members; the receiver delivers locally and never forwards again (one
//     broker-to-broker hop). A node that fails or leaves loses its interest
//     at once.
//   - Retained messages: stamped by a hybrid logical clock, broadcast to
//     every peer, applied last-writer-wins by (stamp, origin); deletions
//     leave tombstones for TombstoneTTL; every new link starts with a full
//     sync both ways.
//   - Session directory: the owner of a client id is chosen by rendezvous
//     hashing over the alive members. At CONNECT, Takeover registers the
//     session here with its owner and, if another alive node held it, has
//     that node hand it over (package broker closes the client's connection
//     there and exports the session). Nodes re-register their sessions when
//     membership changes or when they restart. What reaches the old copy
//     after its export is relayed to the new node (relay.go), so a move
//     loses no message.
//
// Concurrency: a Cluster is safe for concurrent use; the broker calls it
// from connection goroutines. It owns two goroutines (the membership
// watcher and the directory loop) besides the peer manager's, and Close
// waits for all of them. It calls into the broker without holding its own
// locks, except that retained updates from peers are applied one at a time
// under the retained lock (so tombstone checks and applies do not
// interleave).
//
// It must not touch sockets except through package peer, and it knows
// nothing of MQTT packets: the broker and sessions own those.
package cluster
