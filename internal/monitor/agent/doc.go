// Package agent is the monitoring shell of a node: every interval it
// reads the process's CPU time and memory (package procstat), the node's
// message and byte counters and its network coordinate, folds the
// Tracker's topics (package monitor) into a Report with the node's load
// over the interval, and hands the encoded report to Send, which the node
// wires to the metadata leader's placement manager (over the peer link, or
// directly when this node leads).
//
// Reports are soft state: one that cannot be sent (no leader known, the
// link down) is counted and dropped, and the next one replaces it. The
// agent numbers its reports (Incarnation, Seq) so the manager keeps the
// newest per node.
//
// Concurrency: Run owns the agent's state on the caller's goroutine and
// returns when its context ends; Stats is safe from any goroutine.
package agent
