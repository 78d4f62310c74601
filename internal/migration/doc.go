// Package migration moves placement groups' homes: it carries out the
// placement decisions recorded in the metadata group (fsm.Desired), with
// no publisher or subscriber reconnecting and no message lost.
//
// # The executor runs on the group's home
//
// A decision is carried out by the node that is the group's home when the
// work starts (State.Decisions(self)), not by the metadata leader: the home
// holds the group's log (a handover reads it), and for a replicated group it
// is the Raft leader, the only replica that may change the group's
// membership or hand over the lead. After a replicated group's lead moved,
// the decision is still pending (the old home is a surplus voter) and the
// work list of the new home has it: it removes the surplus replica. A
// failover moves the work with the home the same way.
//
// # The step machine
//
// Machine is pure: built from the record (with its decision) and the node
// running it, it returns one Action at a time and takes each one's Outcome.
// It never does I/O and reads no clock; testdata/machine.golden traces it.
//
// Replicas 1 (KindHandover), from home H to a node T holding no replica:
//
//  1. send_snapshot: H copies its log to T (a sequencer snapshot, in
//     chunks) while the group still takes publishes;
//  2. fence: H's home side answers the group's batches "moving" (access
//     nodes hold them) and waits until what it took is applied;
//  3. send_tail: H sends the records appended since the snapshot; T
//     appends them and closes the log, now equal to H's;
//  4. propose_home: set_group_home with epoch + 1 and Handover [T]: the
//     record's home and voters switch in one step. The epoch precondition
//     makes a repeat after an unknown outcome commit once or conflict with
//     the record it made;
//  5. unfence (redirect): H answers the group's batches "not leader: T";
//  6. await_target: T serves the group (its replica opened on the log it
//     was handed).
//
// The pause (publishes held, no commit possible) is 2 to 6.
//
// Replicated (KindReplicated): propose_members (T a learner), add_learner,
// await_caught_up, promote, propose_members (T a voter), fence,
// transfer_leadership, unfence (redirect), await_target; T's replica keeper
// records T as home once it leads, with the decision's reason. Then on T
// (KindSettle): remove the replicas the decision drops, propose_members.
//
// A failure before the switch undoes the fence and what T was handed; the
// decision stays pending and is tried again after a backoff.
//
// # The driver
//
// Driver watches the metadata copy and runs up to Workers migrations at
// once (config placement-executors), one per group, each through the
// node's Ops. It keeps the recent migrations (group, from, to, reason,
// state, total time, pause, error) for GET /v1/migrations and counts them
// in sextant_migrations_*.
package migration
