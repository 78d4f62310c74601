// Package node is the composition root of one Sextant node: it builds the
// store, broker, listeners, admin API and cluster parts (the cluster
// address's multiplexer, the metadata group, membership and the cluster
// layer) from a config.Config and the process-level node.Options (the
// network it listens and dials on, its clock, a seed; netx.Host and the
// wall clock for `sextant serve`, memnet and synctest's fake time for
// in-process test clusters), starts them, and shuts them down in order. It
// also drains a node before a restart or removal (drain.go: clients sent to
// other nodes with their sessions, metadata leadership handed over),
// removes dead nodes from the cluster, rejoins the members it remembers
// after a restart whatever its join list, and answers not ready while it
// is cut off from the rest of the cluster (rejoin.go). inspect.go answers
// the admin API's listings of sessions, subscriptions, retained messages
// and topics.
//
// Lifecycle: a Node has a root context and one run.Group for its own
// goroutines (the admin server, the metadata join and the registration in
// the node registry); Shutdown (or Halt, without the graceful leave) stops
// it last and waits for it.
//
// It is imported only by cmd/sextant and by tests (lint); nothing in the
// data path imports it.
package node
