// Package manager is the live placement manager: it runs on the metadata
// leader, turns the nodes' monitoring reports (package monitor) and the
// metadata's group records into a placement.Snapshot, runs the planner
// (ePulsar's Algorithm 1 with hysteresis) every interval and on events,
// and records each decision in the metadata group as the group's desired
// placement (fsm.SetGroupDesired), for the migration executor on the
// group's home to carry out.
//
// Inputs:
//   - Receive(from, body): a node's report, sent every interval over the
//     peer link to the leader (or handed over locally on the leader). The
//     latest report per node is kept; a report older than StaleAfter is not
//     used. A report that shows an overloaded node, or clients of a topic
//     at an access node that had none (clients moved) or farther ones, asks
//     for an event round.
//   - Meta: the metadata's local copy (groups, rules, nodes), leadership,
//     and proposals.
//
// A round: every registered node with a fresh report and a coordinate is a
// candidate home, with its load and message rates. Every group whose home
// (or pending desired home) is a candidate is a topic of the snapshot: its
// topics' per-node entries merged into one folded client per access node
// and side (placement.Client.Count), E(t) on that home, Lth from the rule
// the group was created under. A group whose home left the registry is
// placed anew (reason rebalance); one whose home has not reported is left
// alone (a dead home is the failover's business, not placement's). Timer
// rounds are numbered 1, 2, 3, ...; an event round repeats the last number
// (placement.Snapshot.Round), so confirmation and cool-down count
// intervals, not events. Event rounds are at least EventGap apart and plan
// only when something is violated, overloaded or without a home.
//
// Decisions: each move becomes a set-desired command against the group's
// epoch, reason violation (latency), overload (shed) or rebalance (no
// home); the voters keep the group's replica count, choosing among the
// current voters and the new home by the rule's spread
// (fsm.ChooseVoters). Move records an operator's decision (reason manual),
// which the manager's own do not replace. A decision the state machine
// refuses (the epoch moved, a manual decision pends) is logged and
// re-planned at the next round.
//
// Leadership: every round starts by asking Meta.IsLeader. A node that is
// not the leader plans nothing and proposes nothing; one that loses
// leadership drops its planner state, and one that wins it rebuilds the
// cool-downs from the records (HomeSince of moved groups, At of pending
// decisions), so a leader change does not make groups move early.
//
// Concurrency: a Manager is safe for concurrent use. Run's goroutine owns
// the planner state; reports and status sit under one mutex that is never
// held across a call into another subsystem. Run returns when its context
// ends.
//
// Who uses it: the node (every node runs one; only the leader's plans) and
// the admin API (Status, Move). The migration executor (internal/migration)
// carries its decisions out (fsm.State.Decisions). See
// docs/design/placement-live.md and docs/design/migration.md.
package manager
