// Package fsm is the metadata state machine: the node registry (id ->
// labels, addresses, time of joining) and the ordered list of policy rules
// that choose each topic's mode (direct or sequenced), latency threshold,
// replica count and spread, placement-group template and retention.
//
// It is a pure core: no I/O, no clock, no goroutines. A State is a value:
// State.Apply returns a new State and a Result, and never changes the State
// it was called on, so one State can be read from any number of goroutines
// while the shell (package meta) applies the next command. Apply is
// deterministic: the same commands in the same order give the same State
// and the same Snapshot bytes on every node. Times inside commands (a node's
// JoinedAt) are chosen by the proposer, never read here.
//
// Commands and snapshots are versioned JSON (FormatVersion). Decoders are
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
