// Package directory owns the cluster's session directory: which node holds
// each MQTT session, and the hand-over of a session to the node its client
// connected to. The owner of a client id's entry is the winner of
// rendezvous hashing over the alive members (Owner); it keeps claims (the
// holder and the hybrid logical stamp of the CONNECT that put the session
// there). At CONNECT, Takeover registers this node's claim with the owner
// and, if another alive node held the session, has that node export it; the
// holder keeps its copy until this node confirms (release), a lost answer
// is asked for again, and a hand-over that cannot finish refuses the
// CONNECT (broker.ErrSessionMoving) and restores the old claim. A clean
// start registers in the background. Run re-registers this node's sessions
// when membership changes, on new links and every ResyncInterval, and
// settles hand-overs never released. docs/design/cluster.md has the
// protocol and its failure cases.
//
// Requests travel on peer links (Peers) with the method numbers in
// wire.go; a moving session is encoded in the store's record layout.
//
// Concurrency: a Service is safe for concurrent use: its entries, held
// sessions and hand-overs sit under one mutex, never held while calling
// the broker or a peer. Its goroutines run in the group its owner gives it
// (Config.Group). Imported by the cluster layer (package cluster).
package directory
