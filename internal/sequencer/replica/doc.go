// Package replica makes a sequencer.Sequencer the state machine of a
// replicated placement group: FSM implements replication.FSM over it,
// converting the replication layer's entries into the sequencer's. It is
// the only place the two meet, so that the sequencer, a state machine over
// the topic log, imports nothing of the replication layer, the Raft library
// or the network.
//
// Concurrency: an FSM is used as the replication layer uses its state
// machine (Apply, Snapshot and Restore from one goroutine at a time;
// Snapshot's Persist concurrently with Apply). The node imports it when it
// opens a group's replica; nothing else needs to.
package replica
