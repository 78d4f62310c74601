// Package meta runs the cluster's metadata group: one hashicorp/raft group
// whose voters are the core nodes (1, 3 or 5) and whose other members are
// non-voters that keep a local read copy. The replicated state machine is
// package meta/fsm (node registry and policy rules); this package is its
// shell: storage, network, leadership and the context-aware API.
//
// Storage lives in Config.DataDir: the Raft log and stable store in
// DataDir/wal (hashicorp/raft-wal, 8 MiB segments), snapshots in
// DataDir/snapshots (raft.FileSnapshotStore). A node reopened on the same
// DataDir resumes where it stopped and catches up from the leader. With
// Config.InMemory (a node that keeps nothing durable: in-process test
// clusters, benchmarks) all three live in memory and a reopened member is
// a new one.
//
// Network: the group listens on one net.Listener and dials with a
// netx.DialFunc, so the same code runs over TCP in production and over
// memnet in tests. In a node, the listener is the 'R'/'F' share of the
// cluster address, which a peer.Mux splits between the metadata group,
// gossip and peer links. Every connection starts with one byte: 'R' for
// Raft's RPC streams, 'F' for a forwarded request; with Config.TLS, a
// mutual TLS handshake follows that byte (the byte stays in the clear for
// the multiplexer). Forwarding is how a node that is not the leader (a
// follower or a non-voter) proposes a command or asks for a membership
// change: it sends the request to the leader it knows (or, when joining, to
// any address it was given), which executes it and answers with the result
// or with a hint naming the current leader. A node keeps its forward
// connections to the leader (forward_pool.go: up to 16 idle, closed when
// the leader changes or after 30 s idle, a broken one redialed), so a
// forwarded write costs one round trip, not a dial more; the leader serves
// a forward connection's requests one after another until it is idle for
// 2 minutes. Join, which asks addresses that may not lead, uses a
// connection of its own per request. One cost: a request written on a
// kept connection to a leader that restarted before this node saw the
// leader change ends as an unknown outcome (callers re-propose with their
// preconditions), where a new dial would have failed cleanly and been
// retried.
//
// Membership of the group: a new cluster starts when the nodes listed in
// Config.Bootstrap open with empty storage (all of them must be given the
// same list); a single node with no cluster configuration is bootstrapped
// with itself as the only voter. Other nodes start empty and are added by
// the leader (AddVoter, AddNonvoter), typically after they ask with Join.
//
// Timing: Raft's HeartbeatTimeout is how long a follower waits without
// hearing from the leader before it stands for election (the leader sends
// heartbeats about ten times per HeartbeatTimeout); ElectionTimeout bounds a
// candidate's wait for votes; LeaderLeaseTimeout is how long a leader keeps
// acting without hearing from a quorum.
//   - LAN (default): heartbeat and election timeouts 500 ms, lease 250 ms,
//     commit timeout 20 ms. Voters in one site see RTTs of about 1 ms, so
//     500 ms is hundreds of round trips of margin against spurious
//     elections while a dead leader is replaced in about 0.5 to 1.5 s
//     (Canal reports 667 ms to find a new leader; Raft's library default is
//     1 s).
//   - WAN: heartbeat and election timeouts 2.5 s, lease 1.5 s, commit
//     timeout 50 ms. For voters in different regions: inter-city RTTs reach
//     about 300 ms (WonderNetwork's ping statistics: median 139 ms over all
//     city pairs), so a heartbeat round trip plus a lost packet or two must
//     fit well inside the timeout; failover then takes a few seconds.
//
// Placement groups (groups.go): CreateGroup, SetGroupHome, SetGroupMembers
// and DeleteGroup propose the group commands and wait until this node's
// copy holds their effect; a create that lost the race returns the record
// that won, a stale epoch the current record.
//
// Reads: State returns this node's copy of the state, without a round trip.
// It may lag the leader (on a non-voter, or a partitioned follower); Wait
// blocks until a given log index is applied locally, which gives
// read-your-writes after Propose. ReadBarrier gives a linearizable read:
// it asks the leader for its read index (forwarded op read_index: the
// leader runs a Raft barrier, which commits an entry of its term, so a
// deposed leader cannot answer, and applies every earlier one) and waits
// until this copy applied it. At Open a goroutine (catchup.go) runs it
// until it succeeds once and then closes CaughtUp: a restarted node's copy
// comes from its last snapshot, and Raft applies the later entries only
// once a leader tells it the commit index, so until CaughtUp the copy may
// name this node the home of a group that moved away while it was down.
// Whoever acts on the copy for sequenced groups waits for it.
//
// Concurrency: a Meta is safe for concurrent use. Blocking calls take a
// context. Meta owns its goroutines (the accept loop, which is netx.Accept,
// the catch-up,
// the connection classifiers and forward handlers, and the waiters on Raft
// futures) in one run.Group, whose context bounds served requests; Close
// stops it, shuts Raft down and waits for all of them. The listener passed
// in Config belongs to Meta from Open on.
//
// Who uses it: the node (internal/node) opens it at Start, joins the group
// in the background when the config names nodes to join, and registers
// itself in the node registry; the admin API reads and writes policy rules
// through it.
//
// Nothing outside this package imports hashicorp/raft for the metadata
// group; the broker's replication groups are a separate package.
package meta
