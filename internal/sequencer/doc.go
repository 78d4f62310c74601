// Package sequencer is a placement group's replicated state machine over
// the group's topic log (topiclog.Log), with the methods of
// replication.FSM (package sequencer/replica adapts it to that seam), so
// that the group's home and every replica assign each sequenced publish
// the same position in the group (Seq) and the same index in its topic, and
// recognise a publisher's retries. It also serves the log's reads, with
// records decoded, to the delivery side.
//
// # Commands
//
// A command is one Raft entry (command.go has the binary encoding,
// versioned and fuzzed): a publish batch (each publish: topic, encoded
// message, retain flag, QoS, dedup key) or a retention tick (the bounds to
// apply; the entry's time, chosen by the leader, is its now). Apply
// decodes each entry, deduplicates its publishes and appends the new ones
// with one topiclog.AppendBatch per entry, each record marked with the
// entry's Raft index and stamped with the entry's time, so replicas applying
// the same entries hold byte-identical logs. The result of a publish is its
// (topic index, group seq), or the original's for a duplicate. An entry
// that does not decode or breaks a limit is refused with a Result.Err,
// deterministically, and changes nothing; only an I/O failure of the log is
// an error of Apply, after which the sequencer refuses to apply until it is
// reopened.
//
// # Deduplication
//
// A publish's key is (client id, packet id, nonce): the access node picks
// the nonce when it first receives a PUBLISH and reuses it whenever it
// retries that publish (at a new home after a failover, say). The dedup
// table maps (client id, packet id) to the newest record that carried it,
// with its nonce, seq and index:
//
//   - same (client, packet id) and nonce: a retry. Nothing is appended; the
//     result is the original's seq and index, flagged Duplicate.
//   - same (client, packet id), another nonce: a new message (MQTT lets a
//     client reuse a packet id once acknowledged). It is appended and
//     replaces the entry.
//   - no key (QoS 0): never deduplicated.
//
// Publishes of one entry (or one Apply call, with BatchEntries) are
// deduplicated against each other in order, exactly as if each had been
// applied alone.
//
// The rule that bounds the table: an entry lives while its record is in the
// window, the newest Horizon positions of the log that retention has kept
// ([max(FirstSeq, NextSeq-Horizon), NextSeq)). Entries leave only through
// the window's floor (it moves after every append and retention tick), never
// for a wall-clock age or under memory pressure. So:
//
//   - the table is a function of the log alone: for each (client, packet
//     id), its newest keyed record in the window. Every replica holds the
//     same table after the same entries, and a restarted replica rebuilds
//     it exactly by reading the window (Open does; each record's payload is
//     an envelope holding its key and QoS in front of the message). No
//     snapshot is needed for that; snapshots carry the table too, so that a
//     replica installing one does not have to read the window.
//   - it is bounded: at most Horizon entries per group (one per record of
//     the window) and at most 65,535 per client (the packet-id space).
//   - Horizon is part of the state machine: all replicas of a group must
//     use the same (Restore refuses a snapshot kept under another).
//
// What it guarantees: a retry with the same key is answered with the
// original's seq and index, without a second record, as long as fewer than
// Horizon records were appended to the group after the original and
// retention has not removed it. A retry later than that is appended again
// (a duplicate delivery); DefaultHorizon (65,536 records) covers several
// seconds of a busy group, far longer than a failover and the access node's
// retry.
//
// Restarts. Applied() is the log's LastMark at Open: the last entry that
// appended a record. Entries after it that appended nothing (every publish
// a duplicate, retention ticks, refused entries) are given again by the
// replication layer after a restart. That is harmless and gives the same
// results: the table is rebuilt from the same records, and a retention
// tick's effect is idempotent. A tick whose file removal failed is an
// Apply error, so the tick is given again after the reopen (the file comes
// back at Open, and the tick removes it again before anything else is
// appended), which keeps the window's floor equal on every replica.
//
// # Snapshots
//
// Snapshot = dedup table + topic-log snapshot (snapshot.go has the
// format): Snapshot encodes the table and takes references on the log's
// files; Persist writes both and runs concurrently with Apply. Restore
// replaces both (the log's restore is all old or all new, even across a
// crash) and sets Applied() to the snapshot's index.
//
// # Concurrency
//
// Apply, Snapshot and Restore are called by one goroutine at a time (the
// replica's apply goroutine), which owns the dedup table. Reads (ReadSeq,
// Range, Get, Latest, LatestRetained, Bounds, ...), Applied, Stats,
// Changed and WaitSeq are safe at any time, concurrently with Apply: they
// go to the topic log, which serves reads while it appends. Changed and
// WaitSeq let a live feed wait for new records without polling.
//
// # Recent records
//
// ReadSeq near the log's end (a live feed's poll, 17% of a replicas-3
// home's processor time when it read the segment files and decoded) is
// answered from the records Apply appended most recently, kept decoded in
// memory (recent.go; Options.RecentBytes, 1 MiB by default, whole batches,
// oldest dropped first; a replica not read for 64 batches, a follower
// while the home serves the feeds, keeps none until it is read). Apply adds a batch after the log took it and
// before it wakes readers; Restore and Close empty the memory before they
// replace or close the log; a retention tick trims it after removing the
// prefix, and a read checks the log's first position after reading memory.
// A read starting before what memory holds goes to the log. Records never
// change at a position (the log holds committed records only), so what
// memory returns is always the log's answer (recent_test.go checks it
// against the log, across retention and restores).
//
// # Who may import it
//
// The node (which opens one per group it replicates and hands it to the
// replication layer through sequencer/replica), the publish path and the
// delivery layer (reads). It imports the topic log and nothing of the
// replication layer, Raft, the network, the broker or the cluster, not
// even through other packages, and it reads no clock (internal/lint checks
// this).
package sequencer
