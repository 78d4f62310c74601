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
//  2. propose_home: H records its fence durably (fences.go), holds its
//     replica open (replicas.Set.Keep) and proposes the switch
//     (set_group_home, epoch + 1, T home and only voter, handover_from H)
//     while it still serves; T's replica set does not open the group on
//     that record until the log handed over is installed and marked for
//     its epoch;
//  3. fence: H's home side answers the group's batches "moving" (access
//     nodes hold them) and waits until what it took is applied;
//  4. send_tail_switch: H sends the records appended since the snapshot
//     with the position its log ends at, the switch's epoch and the
//     committed record; T appends them, installs the log, marks it, opens
//     the group on the record and answers once it serves;
//  5. unfence (redirect): H answers the group's batches "not leader: T",
//     removes its fence record and releases its replica;
//  6. await_target: H's metadata copy names T.
//
// The pause (publishes held, no commit possible) is 3 to T serving: the
// drain, the tail's one-way trip and the install, no metadata round. A
// failure before the switch commits lifts nothing (H never stopped) but
// T's staging. After it, nothing is undone: the group is T's, so H stays
// fenced and settles the handover from its fence record (KindRecover, as
// after a restart): it proposes the record unchanged at the switch's
// epoch (exactly one of that and the switch commits); if that commits the
// fence is lifted, else the whole log is handed over again (or T is found
// serving) and H redirects.
//
// Replicated (KindReplicated): propose_members (T a learner), add_learner,
// await_caught_up, promote, propose_members (T a voter), fence,
// transfer_leadership, unfence (redirect), await_target; T's replica keeper
// records T as home once it leads, with the decision's reason. Then on T
// (KindSettle): remove the replicas the decision drops, propose_members.
//
// A failure before the switch undoes the fence and what T was handed; the
// decision stays pending and is tried again after a backoff. A handover
// left fenced after its switch is settled again after a backoff too.
//
// # The driver
//
// Driver watches the metadata copy and runs up to Workers migrations at
// once (config placement-executors), one per group, each through the
// node's Ops. It keeps the recent migrations (group, from, to, reason,
// state, total time, pause, error) for GET /v1/migrations and counts them
// in sextant_migrations_*.
package migration
