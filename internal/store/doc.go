// Package store owns a node's durable local state: MQTT sessions with their
// expiry, subscriptions and pending will; the queued and inflight outbound
// messages of persistent sessions; inbound QoS 2 packet ids awaiting PUBREL;
// and retained messages. It keeps them in one bbolt file and is the only
// package that imports bbolt. It knows nothing of connections, topics
// matching or the cluster, and decides nothing about MQTT semantics: the
// session package says what to write and when to acknowledge.
//
// # Writing: batches and group commit
//
// Callers collect operations in a Batch and hand it to Commit with a done
// callback. One writer goroutine, started by Open and stopped by Close, owns
// every write transaction: it takes everything queued (up to
// Options.MaxBatchOps operations) into one bbolt transaction, commits it, and
// then calls the done callbacks of its batches in the order they were queued,
// so completions are FIFO across all callers. Many concurrent publishers thus
// share one transaction and, with FsyncAlways, one set of fsyncs.
//
// The queue between Commit and the writer is bounded (Options.QueueLen).
// Overload policy: back-pressure. A Commit that finds the queue full blocks
// until the writer makes room or its context ends; nothing is dropped. The
// broker acknowledges a QoS 1/2 publish only from done, so a slow disk slows
// publishers down instead of growing memory.
//
// A write transaction that fails (an I/O error, a failed fsync) fails every
// batch in it, and the store then refuses all further writes with ErrFailed:
// after a failed fsync the kernel may have dropped the written pages, so
// later successes would not prove durability. Restart the node to recover.
//
// # Durability: what each fsync mode survives
//
// bbolt writes a transaction's pages with pwrite, then a meta page naming the
// new tree, and relies on fsync ordering: data pages must reach the disk before
// the meta page that references them. bbolt's meta pages carry a checksum, so a
// torn meta write is detected and the previous meta page is used; the data
// pages have no checksum.
//
//   - FsyncAlways: bbolt fdatasyncs the data pages, then the meta page, before
//     the transaction commits, and done runs after that. An acknowledged
//     batch survives a process crash, kill -9, a kernel crash and a power loss
//     (given a disk that honours flushes). Cost: two fdatasyncs per
//     transaction, shared by every batch in it.
//   - FsyncBatch: done runs once the transaction is written to the OS page
//     cache, without fsync; the writer calls fdatasync every
//     Options.SyncInterval if anything was written, and at Close. An
//     acknowledged batch survives a crash of the process (kill -9, panic, OOM
//     kill), since the kernel still holds its pages. A kernel crash or power
//     loss can lose every batch acknowledged since the last completed sync
//     and, worse, can leave the file corrupt: without fsync ordering the
//     kernel may write a meta page before the pages it references, and bbolt
//     reuses pages freed since the last sync, so even the last synced tree
//     may have been partly overwritten. The meta checksum does not catch
//     this; the file may then fail to open, fail Check, or return wrong data.
//     After a power loss in this mode, run Check and discard the file if it
//     fails. The periodic sync bounds how much unsynced data exists; it does
//     not make older data safe while newer writes are unsynced. A store that
//     has been idle for one SyncInterval is fully on disk.
//   - FsyncNever: like FsyncBatch without the periodic sync (only Close
//     fsyncs). The kernel writes dirty pages back when it chooses (on Linux
//     typically within about 30 s), so the exposure to a kernel crash or
//     power loss (lost acknowledged batches, a corrupt file) is unbounded in
//     time. Process crashes are survived as in FsyncBatch.
//
// Growing the file always fsyncs (bbolt syncs the new file size in every
// mode).
//
// # Layout
//
// Buckets: meta/schema (uint32 big-endian SchemaVersion);
// sessions/<client id> (session record); messages/<client id>/<seq as 8 bytes
// big-endian> (queued message record); inbound/<client id>/<packet id as 2
// bytes big-endian> (empty value); cursors/<client id>/<placement group> (the
// position of the last record of the group the session took, 8 bytes
// big-endian: written with each delivery that moves it, replaced by the
// session record's cursors at PutSession, merged into the record by
// LoadSessions; the bucket is created when a file of schema 1 written before
// it is opened); retained/<topic> (message.Append
// encoding; an empty payload is a cluster's deletion tombstone, kept with
// its stamp until DeleteRetainedTombstone or a newer message). Session and queued-message records start with a version byte;
// messages inside them use message.Append. Client ids and retained topics are
// bbolt keys and so are limited to 32768 bytes (MQTT allows 65535); longer
// ones are rejected with ErrInvalid. The store does not enforce references
// between records: DeleteSession removes a client's messages, inbound ids and
// cursors, and nothing else does.
//
// Decoders are strict: a record that the encoder could not have produced is
// reported as an error wrapping ErrCorrupt, never a panic.
//
// # Concurrency
//
// All Store methods are safe for concurrent use. done callbacks and Observer
// methods run on the writer goroutine and must not block (in particular, not
// on another Commit). Load methods read in chunks of short read transactions
// and run their callbacks outside them, so callbacks may commit. Loads are
// meant for startup and are not snapshots if commits run concurrently.
package store
