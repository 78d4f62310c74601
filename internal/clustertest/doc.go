// Package clustertest runs Sextant clusters in one process for tests: N
// nodes on a memnet network, each built by node.New as `sextant serve`
// builds one (broker, metadata group, membership gossip, cluster layer and
// MQTT listener on the node's own host of the network), a latency matrix,
// partitions, kills (node.Halt: no graceful leave) and restarts, and a
// small MQTT 5 client on Sextant's own packet codec that connects to any
// node. Create a Cluster inside a testing/synctest bubble: gossip, failure
// detection, the metadata group's Raft, link backoff and latency then run
// on fake time, so a test that waits for a node to be declared failed takes
// milliseconds.
//
// It is test infrastructure: production code never imports it (lint). It
// may import every package of the node.
package clustertest
