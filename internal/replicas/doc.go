// Package replicas runs this node's replicas of placement groups: for every
// group whose record in the metadata group names this node a voter or a
// learner, a sequencer (package sequencer) over the group's topic log and a
// replica that orders commands for it: a Raft group of the replication
// engine when the group has several voters, a replication.Single when it
// has one (replicas 1). It follows the metadata group: a record that
// appears opens the replica (the initial voters bootstrap it with the
// record's voter list, which is identical everywhere, so concurrent
// bootstraps agree), a record that drops this node closes it, a deleted
// record also removes its storage. A record that names this node home by a
// handover (fsm.Group.HandoverFrom) opens the group only once the log
// handed over is marked installed for the record's epoch
// (WriteHandoverMark): the storage here is not the group's log before
// that. Keep holds a replica open whatever the record says (a handover's
// old home reads its log after the switch named the target).
//
// Each open replica has a keeper goroutine that does what only the leader
// of the group does: after winning an election it records itself as the
// group's home (set-home with the record's epoch + 1, reason failover) when
// the record names another node, so access nodes re-route; and every
// RetentionInterval it proposes a retention tick with the record's
// retention bounds.
//
// Storage: Dir/<escaped group id>/ holds the Raft log (wal/) and snapshots
// of a replicated group (the engine's layout) and the topic log (log/) of
// every group.
//
// Concurrency: a Set is safe for concurrent use. It owns the watcher
// goroutine and one keeper per open group (one run.Group); Close stops them
// and closes every replica and sequencer. Readers (the publish path's home
// side, feeds, history reads) get a *Replica with Get and may use it until
// it is closed: its sequencer's reads then fail with sequencer.ErrClosed,
// its replica's Submit with replication.ErrClosed. Changed wakes readers
// waiting for records in any group of the node.
//
// Who imports it: the node (internal/node) builds one; the publish path
// (internal/cluster/sequenced) and the delivery layer (internal/delivery)
// read it through small interfaces of their own.
package replicas
