// Package fsm is the metadata state machine: the node registry (id ->
// labels, addresses, time of joining), the ordered list of policy rules
// that choose each topic's mode (direct or sequenced), latency threshold,
// replica count and spread, placement-group template and retention, and
// the placement groups of sequenced topics (id -> rule, home, voters,
// learners, epoch, retention).
//
// Placement groups: State.GroupFor maps a topic to its group id under the
// rules (first matching rule; sequenced only; the rule's template
// expanded, or the topic itself). A group is created once (a second create
// is ErrConflict and returns the existing record, so concurrent creators
// agree), its home moves only to the current epoch + 1 (set-home, with a
// reason and a time), and its voters and learners change under the current
// epoch (set-members). The home is always a voter. ChooseVoters is the
// pure rule that picks a new group's voters from the alive nodes by spread
// (zone or site), distance and tier.
//
// Placement decisions (desired.go): set-desired records in a group where
// the placement manager or an operator wants it (home, voters, reason
// violation, overload, manual or rebalance, time), against the group's
// current epoch; the migration executor on the group's home works while
// the record differs from it, and the state machine clears it when a
// set-home or set-members makes the record equal to it (or a decision for
// where the group already is arrives, or cancel-desired names it). A
// pending manual decision is not replaced by the manager's. State.Decisions
// lists the pending ones.
//
// It is a pure core: no I/O, no clock, no goroutines. A State is a value:
// State.Apply returns a new State and a Result, and never changes the State
// it was called on, so one State can be read from any number of goroutines
// while the shell (package meta) applies the next command. Apply is
// deterministic: the same commands in the same order give the same State
// and the same Snapshot bytes on every node. Times inside commands (a node's
// JoinedAt, a group's Created, a home change's At) are chosen by the
// proposer, never read here. Groups are held in a persistent table (a
// command copies one of 64 shards), so Apply stays cheap with many groups.
//
// Commands and snapshots are versioned JSON (FormatVersion,
// SnapshotVersion; version 1 snapshots, from before groups, still
// restore). Decoders are
// strict (unknown fields, trailing data and unknown versions are errors) and
// fuzzed. Invalid input yields an *Error whose Code maps to a sentinel
// (ErrInvalid, ErrConflict, ErrNotFound) and whose Field is a path such as
// "rules[2].replicas", so the admin API can answer with a precise 400.
//
// The default rule, `#` -> direct, is implicit: it is never stored and
// applies to every topic no stored rule matches.
//
// This package imports nothing from Sextant and nothing that does I/O; it
// must stay that way (a lint test enforces the I/O part).
package fsm
