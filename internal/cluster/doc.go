// Package cluster is a node's cluster layer for direct topics: the shell
// (Layer) that wires three parts, each in its own package, to the peer
// links (package peer) and to membership (package membership, or anything
// with its Members/Events):
//
//   - routing: the routing table of peers' announced interest, and the
//     choice of the nodes a message goes to (Layer.Forward sends it; the
//     receiving Layer hands it to broker.DeliverForwarded, never further).
//     The links (package peer) carry each QoS 1/2 message to its node once
//     and in order while both nodes live, through a transit node when the
//     direct link is cut (ranked by Config.Estimate, network coordinates);
//   - retainsync: retained replication, last writer wins by hybrid logical
//     stamps (package hlc), tombstones, and a full sync on every new link;
//   - directory: the session directory (claims spread by rendezvous
//     hashing over the alive members, two-phase hand-overs at CONNECT).
//
// The shell itself relays what reaches a moved session's old copy after
// its export to the new node (relay.go: broker.Relay on the old node,
// Relays.DeliverRelayed on the new one), so a move loses no message.
//
// Services built on the links (the sequenced publish path, the delivery
// layer's feeds) serve their own requests through Handle (request methods
// 32 and up) and call peers through the peer manager (Peers).
//
// The shell owns what they share: the peer manager and its handler (frames
// from peers are decoded here and dispatched to the part they belong to),
// the alive member set (pushed to the directory), the link events (a new
// link gets the retained snapshot and pokes the directory), the RTT probe
// and one goroutine group for all of their loops. The broker sees the
// layer only through the small interfaces of broker.Remote, which Remote
// fills in. docs/design/cluster.md opens with a map of these parts and
// walks one cross-node publish through them.
//
// Concurrency: a Layer is safe for concurrent use; the broker calls it
// from connection goroutines. It owns the member watcher, the directory
// loop, the tombstone sweeper, the RTT prober and the directory's
// background registrations besides the peer manager's goroutines, and
// Close waits for all of them. It calls into the broker without holding
// its own locks.
//
// It must not touch sockets except through package peer, and it knows
// nothing of MQTT packets: the broker and sessions own those.
package cluster
