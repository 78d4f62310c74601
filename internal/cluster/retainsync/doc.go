// Package retainsync owns retained replication between nodes for direct
// topics: a cluster-wide last-writer-wins map. A retained update published
// on a node is stamped by the cluster's hybrid logical clock (package hlc),
// applied locally by the broker, then sent to every connected peer, which
// applies it if it is newer by (stamp, origin) (retained.Newer, the one
// rule). A deletion leaves a tombstone for TTL, so an older write arriving
// late does not bring the message back; tombstones are stored by the broker
// and reloaded after a restart. Every new link starts with a full sync both
// ways (Snapshot: every retained message and live tombstone).
//
// Concurrency: a Replicator is safe for concurrent use. Updates from peers
// are applied one at a time under its lock (so a tombstone check and the
// apply it guards do not interleave with another update); Run sweeps
// expired tombstones on its caller's goroutine until its context ends.
//
// Imported by the cluster layer (package cluster), which wires it to the
// broker and the peer links; it must not touch sockets.
package retainsync
