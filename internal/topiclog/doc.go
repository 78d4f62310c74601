// Package topiclog owns the topic log of one placement group: a directory
// of append-only segment files holding the records of the group's sequenced
// topics, with a per-topic index, reads by index, range and group position,
// retention and snapshots. It decides nothing about MQTT, replication or
// delivery: records carry an opaque payload (an encoded message.Message) and
// an opaque mark, and the log assigns positions and indexes.
//
// # Records, indexes and positions
//
// Every record has a position (Seq) in the group's log, from 1 and
// gap-free, and an index in its topic, from 1 and gap-free: the position is
// what subscriber cursors and persistent-session backlogs hold, the index
// is what clients see (sx-index) and read history by. Both are assigned by
// AppendBatch. The caller gives each record a time (the log never reads a
// clock, so replicas that apply the same entries stay identical), a mark
// (the Raft index of the entry, so LastMark tells a restarted replica which
// entry it applied last) and a retain bit (LatestRetained is the topic's
// retained message). Logs fed the same batches hold byte-identical
// segments.
//
// A topic's index never restarts: segment headers carry every topic's last
// index, so deleting old segments never loses it.
//
// # Durability
//
// AppendBatch writes a batch into one segment with one write and, with
// SyncAlways, one fsync before it returns. A batch is atomic for readers and
// across crashes: its last record is flagged, and recovery drops a batch
// whose end is missing. With SyncNone (for tests, and for replicas whose
// durability comes from the Raft log) batches are not synced, but segments
// are synced when sealed and a new segment's header and first batch are
// synced with the directory when it is created: so after any crash only the
// last segment can have lost batches, and what it lost is a suffix.
//
// Open verifies every record's checksum, truncates a torn or corrupt tail
// of the last segment (logged and reported in Recovery), and refuses damage
// anywhere else with ErrCorrupt: in an earlier segment, or a damaged frame
// followed by a valid record. docs/design/topiclog.md has the format and
// the recovery rules.
//
// The log does not need to drop records after a position (a truncate-after):
// a replicated group applies only committed Raft entries, which are never
// rolled back, and a replica whose log lost a suffix in a crash re-applies
// the entries after LastMark. A replica whose log is behind the leader's
// snapshot installs it with Restore.
//
// # Concurrency
//
// One writer, many readers. AppendBatch, ApplyRetention, Restore and Close
// are the writer's methods: they are serialised by a mutex that readers
// never take, and a writer holds it across its disk I/O. Reads (Get, Range,
// ReadSeq, Latest, LatestRetained, Bounds, Snapshot and the accessors) may
// run concurrently with each other and with the writer: they find what to
// read under a short read lock and do their I/O after releasing it, on
// segment files they hold a reference to, so retention or Restore never
// pulls a file from under a read. A batch becomes visible to readers all at
// once, after it is written (and synced).
//
// Memory: the index costs about 8 bytes per retained record (a 32-bit file
// offset per record in its segment and a 32-bit position delta per record in
// its topic), plus the topic table. Each segment keeps one open file.
//
// # Filesystem seam
//
// All I/O goes through FS: OSFS in production, MemFS in memory (its
// CrashClone shows what a crash would leave: synced data plus a torn prefix
// of what followed), ErrorFS to inject failures.
//
// # Who may import it
//
// The replication layer (a Raft FSM applies committed entries with
// AppendBatch; replicas=1 appends directly) and the delivery layer
// (subscriber cursors and replays with ReadSeq, retained messages); the
// admin API's history reads go through them. It imports no network, Raft,
// broker or cluster package (internal/lint checks this).
package topiclog
