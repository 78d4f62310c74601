// Package clustertest runs Sextant clusters in one process for tests: N
// nodes on a memnet network (each a broker, its cluster layer, membership
// gossip and an MQTT listener), a latency matrix, partitions, kills and
// restarts, and a small MQTT 5 client on Sextant's own packet codec that
// connects to any node. Create a Cluster inside a testing/synctest bubble:
// gossip, failure detection, link backoff and latency then run on fake time,
// so a test that waits for a node to be declared failed takes milliseconds.
//
// It is test infrastructure: production code never imports it. It may
// import every package of the node.
package clustertest
