// Package placement owns the decision of which node is a topic's home: the
// per-topic monitoring summary (Summarize), the broker-selection policies
// behind the one-method Policy interface (centroid, all-pairs, consistent
// hash, publisher-local, oracle), and the planner (Plan), which is Algorithm 1
// of ePulsar with hysteresis added.
//
// Latencies are one-way, publisher -> home -> subscriber (see package coords
// for units): E(t) is a topic's estimated worst case on its current home,
// W(t,b) the estimated worst case on node b, Lth(t) its threshold.
//
// It is a pure core: Plan is a function of (Snapshot, Config, State) to
// (Result, State). It does no I/O, reads no clock (cool-down counts planner
// rounds) and draws no random numbers; equal inputs give equal outputs, and
// the order of nodes and topics in the input does not change the output. The
// live placement manager (package placement/manager) fills a Snapshot from
// the nodes' reports and the metadata and records the moves as decisions;
// the emulator fills it from a latency dataset. Values passed in are never
// modified. All functions are safe for concurrent use.
//
// It must not import I/O, the clock, or any other Sextant package but coords
// (its manager subpackage is a shell, and may).
package placement
