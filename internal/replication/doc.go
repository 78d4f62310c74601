// Package replication runs this node's replicas of replicated placement
// groups: one hashicorp/raft group per group with replicas 3 or 5, and a
// Raft-free Single for replicas 1, behind one API (Replica) and one state
// machine seam (FSM). It wraps the Raft library once, so that nothing else
// in Sextant touches it for data (internal/meta is the other importer, for
// the metadata group); see docs/design/replication.md.
//
// # Engine, groups, storage
//
// An Engine per node owns every replicated group on the node: their Raft
// instances, their storage (DataDir/<group>/wal: raft-wal log and stable
// store, its segment being written opened for direct I/O: direct.go;
// DataDir/<group>/snapshots; the leader's appends written behind, so its
// fsync runs while the followers write theirs: behind.go), one accept loop
// on the node's cluster address, the group budget (Config.MaxGroups) and the
// metrics. OpenGroup opens a group's replica; a new group starts with
// Bootstrap on each of its initial voters, and grows with AddLearner,
// Promote and Remove on its leader.
//
// # Transport
//
// Group connections share the node's cluster address through its first-byte
// multiplexer: each opens with Kind ('D'), then TLS when the cluster uses
// it (mutual, with the cluster-tls config), then a hello naming the sending
// node, the node it means to reach and the group; the engine answers with a
// status byte and hands the stream to that group's Raft transport, or
// refuses it (unknown group, another node) and counts the refusal. Each
// group has its own hashicorp/raft NetworkTransport over such streams,
// without the library's replication pipeline (it wedges after a refused
// append, hashicorp/raft#612); a leader pipelines AppendEntries to each
// follower with this package's pipeline instead (Config.Pipeline in
// flight, on a stream of its own), which fails over to one request at a
// time at the first refused or failed answer.
//
// # The state machine contract (FSM)
//
// The group calls its FSM from one goroutine at a time, Raft's apply
// goroutine, except Snapshot.Persist, which runs concurrently with Apply:
//   - Applied is called before the group starts and around each batch. It
//     reports the index of the last entry whose effect the state holds,
//     including entries applied before a restart. It may stay behind
//     entries that changed nothing (a deduplicated publish); those are
//     given again after a restart and must be harmless to apply again.
//   - Apply receives committed commands in log order, in batches (many
//     proposals commit together), and returns one result per command; it
//     must be deterministic. Entries at or below Applied() are never passed
//     again: after a restart Raft replays its log from the newest snapshot
//     (or the start), and the group skips what the state machine already
//     holds, so a durable state machine never applies an entry twice. With
//     Raft the log is the durable record: the state machine need not sync
//     each batch, provided Applied() after a crash reports only what
//     survived. Single has no log, so there the state machine must make
//     each batch durable before Apply returns.
//   - An error from Apply is fatal for the replica: it stops applying, the
//     batch's proposals fail with ErrFailed, and the group closes. Reopening
//     it resumes from Applied() and the log.
//   - Snapshot captures the state (quickly; Persist writes it out later);
//     Restore replaces the whole state, after which Applied() must be the
//     snapshot's index. The group stores the index in front of the state
//     machine's bytes and, on start, restores the newest snapshot only if
//     the state machine is behind it.
//
// # Proposals
//
// Only the leader takes commands. Submit queues one (in call order) and
// returns a Pending; Propose waits for it. A dispatcher hands queued
// commands to Raft, whose leader appends every command waiting when it
// writes (one log write, one fsync, one AppendEntries per follower, one
// state machine batch for all of them); a completer returns each result
// once the command is committed on a majority and applied on the leader.
// The queue is bounded (Config.QueueDepth): Submit waits for room until
// its context ends. Errors: *NotLeaderError (errors.Is ErrNotLeader) names
// the known leader; ErrUnknownOutcome when the command may have committed
// (leadership lost, context ended in flight); ErrClosed; ErrFailed.
//
// # Leadership
//
// Leader, IsLeader and Leadership report the leader as this replica knows
// it; Leadership is a one-slot channel where a newer value replaces an
// unread one. TransferLeadership moves it (migration); Close never does.
//
// # Concurrency
//
// Engine, Group and Single are safe for concurrent use. Each group runs
// three goroutines of its own (dispatcher, completer, leadership watcher)
// besides Raft's; Close waits for all of them, after letting every request
// already in Raft get its answer (Raft strands requests it holds when it
// shuts down). The engine owns its accept loop and connection handlers;
// Engine.Close closes every group.
//
// The node's replicas (internal/replicas) open groups on the engine, with
// the sequencer (through sequencer/replica) as their state machine; the
// publish path submits to them. Only internal/meta and this package may
// import hashicorp/raft (a lint test enforces it).
package replication
