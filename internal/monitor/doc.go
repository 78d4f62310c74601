// Package monitor owns what a node measures for live placement (ePulsar's
// monitoring, Section 3.2): who produces and consumes each sequenced topic
// at this access node, at what rates and from how far, and the node's own
// load; and the report that carries both to the placement manager.
//
// The Tracker is the Observer the broker's sequenced publish path and its
// subscription changes call. Per topic it keeps the producers (clients that
// published within the last Limits.IdleReports reports), the message and
// delivery counts since the last report, and the subscriptions whose
// filters may match it. Report folds them, per topic and side, into one
// Side: how many clients, the largest access round trip among them and the
// rate. Clients on one access node share its coordinate and differ only in
// their access round trip, so the entry with the largest one bounds them
// all and the manager rebuilds exact worst-case estimates from it
// (placement.Client.Count): a report's size grows with the topics a node
// serves, never with their clients.
//
// A Report is the node's load (utilisation of CPU, memory and network; its
// message rates, all traffic), its coordinate and the topic entries, in a
// versioned binary encoding with fixed-point numbers (AppendReport,
// DecodeReport; bounded, strict and fuzzed). Utilisation turns two samples
// of cumulative counters into a Load.
//
// It is a pure core: no I/O, no clock, no goroutines. Time comes in as the
// window a report covers. A Tracker is safe for concurrent use (one mutex,
// held for map updates only: Report calls Client.AccessRTT after releasing
// it). Counts of what the bounds dropped are in Tracker.Dropped.
//
// Who imports it: the node's broker wiring (the Observer calls), the
// monitoring agent (internal/monitor/agent) that sends reports, and the
// placement manager (internal/placement/manager) that reads them. See
// docs/design/placement-live.md.
package monitor
