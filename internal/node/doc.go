// Package node is the composition root of one `sextant serve` process: it
// builds the store, broker, listeners and admin API from a config.Config,
// starts them, and shuts them down in order. It is imported only by
// cmd/sextant and by tests; nothing in the data path imports it.
package node
