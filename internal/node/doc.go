// Package node is the composition root of one `sextant serve` process: it
// builds the store, broker, listeners and admin API from a config.Config,
// starts them, and shuts them down in order. It also drains a node before a
// restart or removal (drain.go: clients sent to other nodes with their
// sessions, metadata leadership handed over), removes dead nodes from the
// cluster, and rejoins gossip after a restart without a join list. It is imported only by
// cmd/sextant and by tests; nothing in the data path imports it.
package node
