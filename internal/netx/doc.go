// Package netx owns what every listener and dialler of a node shares: the
// host's network (Host: TCP streams and UDP datagrams, the network
// `sextant serve` runs on; in-process test clusters give a node memnet's
// instead), the one TCP dial helper, and the one accept loop with backoff
// that every server of a node runs (client listeners, the cluster address's
// multiplexer, peer links, the metadata group and gossip streams). Host's
// TCP connections read and write with raw system calls (RawTCP), which
// keeps the runtime's monitor thread asleep at moderate rates.
//
// Concurrency: Accept runs on its caller's goroutine until its listener
// closes or its context ends; the rest is stateless.
//
// Anything may import it except the pure cores (lint), since it is I/O.
package netx
