package migration

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// Kind is the shape of a migration, chosen from the record and the
// decision when it starts.
type Kind string

// Kinds.
const (
	// KindHandover moves a group of one replica to a node that holds none:
	// the old home sends its log, proposes the switch (set_group_home with
	// Handover and HandoverFrom: the record's voters and home in one
	// step) while it still serves, and once that committed fences the
	// group and sends the tail; the target serves once it installed it.
	KindHandover Kind = "handover"
	// KindReplicated moves a replicated group's home: the target joins as
	// a learner if it is not a replica, catches up, is promoted, and takes
	// the lead.
	KindReplicated Kind = "replicated"
	// KindSettle is the end of a replicated migration, on the new home:
	// the replicas the decision does not keep are removed.
	KindSettle Kind = "settle"
	// KindRecover settles a handover from its fence record (fences.go), on
	// an old home that restarted during it or whose tail did not reach the
	// target after the switch committed: the record unchanged at the
	// switch's epoch (whichever of the two commits decides); if the switch
	// had won, the whole log is handed over again (the group fenced), else
	// the fence is lifted.
	KindRecover Kind = "recover"
)

// Op is what an Action asks the driver to do.
type Op string

// Operations. Each is carried out by the driver and answered with one
// Outcome.
const (
	// OpSendSnapshot copies the group's log to the target while the group
	// still takes publishes (the bulk of a handover, outside the pause).
	OpSendSnapshot Op = "send_snapshot"
	// OpFence makes the local home side refuse the group's batches with
	// "moving" (access nodes hold them) and waits for what it took to
	// be applied.
	OpFence Op = "fence"
	// OpSwitch sends, once the switch committed and the group is fenced,
	// the records appended since the snapshot (the target's log is then
	// equal to the old home's) with the committed record; the target
	// installs the log, marks it installed for Epoch and answers once it
	// serves the group. Anything but ok leaves the group fenced here and
	// the handover to be resumed from the fence record (the switch
	// committed: the group is the target's, whose log must be complete).
	OpSwitch Op = "send_tail_switch"
	// OpProposeHome records a new home (epoch + 1); Voters set means a
	// handover's switch (the voters are replaced too, and the record says
	// this node hands the log over): it is written to the fence record
	// first. With Home the node running the migration, it is the reclaim
	// of a recovery: the switch's epoch, so exactly one of the two
	// commits, and the record says which.
	OpProposeHome Op = "propose_home"
	// OpProposeMembers records the voters and learners.
	OpProposeMembers Op = "propose_members"
	// OpAddLearner, OpPromote, OpRemove, OpTransfer change the group's
	// Raft configuration (leader only).
	OpAddLearner Op = "add_learner"
	OpPromote    Op = "promote"
	OpRemove     Op = "remove"
	OpTransfer   Op = "transfer_leadership"
	// OpAwaitCaughtUp waits until the target's replica has applied what
	// the leader had committed when it was asked.
	OpAwaitCaughtUp Op = "await_caught_up"
	// OpAwaitTarget waits until the target serves the group (its replica
	// open and leading, the record naming it home).
	OpAwaitTarget Op = "await_target"
	// OpUnfence turns the fence into a redirect to the new home (after a
	// switch), or lifts it (after a failure).
	OpUnfence Op = "unfence"
	// OpAbort tells the target to drop what it was handed.
	OpAbort Op = "abort"
)

// Action is one step for the driver.
type Action struct {
	Op     Op
	Node   string     // the node the operation concerns (target, replica to remove)
	Home   string     // OpProposeHome
	Epoch  uint64     // OpProposeHome: the new epoch; OpProposeMembers: the current one
	Reason fsm.Reason // OpProposeHome
	// Voters and Learners: OpProposeMembers; Voters also OpProposeHome
	// for a handover.
	Voters   []string
	Learners []string
	// Redirect: OpUnfence after the switch (refuse with the new home's
	// name) rather than after a failure (take publishes again).
	Redirect bool
}

func (a Action) String() string {
	var b strings.Builder
	b.WriteString(string(a.Op))
	if a.Node != "" {
		fmt.Fprintf(&b, " node=%s", a.Node)
	}
	if a.Home != "" {
		fmt.Fprintf(&b, " home=%s", a.Home)
	}
	if a.Epoch != 0 {
		fmt.Fprintf(&b, " epoch=%d", a.Epoch)
	}
	if a.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", a.Reason)
	}
	if a.Voters != nil {
		fmt.Fprintf(&b, " voters=%s", strings.Join(a.Voters, ","))
	}
	if a.Learners != nil || a.Op == OpProposeMembers {
		fmt.Fprintf(&b, " learners=%s", strings.Join(a.Learners, ","))
	}
	if a.Redirect {
		b.WriteString(" redirect")
	}
	return b.String()
}

// Result is how an operation ended.
type Result string

// Results.
const (
	ResultOK Result = "ok"
	// ResultConflict: a metadata proposal was refused because the record
	// changed; Outcome.Record is the current record.
	ResultConflict Result = "conflict"
	// ResultUnknown: a metadata proposal may or may not have committed.
	ResultUnknown Result = "unknown"
	// ResultFailed: the operation failed; nothing was changed by it.
	ResultFailed Result = "failed"
)

// Outcome answers the last Action.
type Outcome struct {
	Result Result
	Err    string
	// Record is the group's record after a metadata proposal (current
	// on a conflict).
	Record *fsm.Group
}

// State is where a migration is.
type State string

// States. A migration ends done or failed.
const (
	StateRunning State = "running"
	StateDone    State = "done"
	StateFailed  State = "failed"
)

// Machine is one migration's steps: pure (no I/O, no clock), driven by
// Outcomes, each Step returning the next Action. See the package comment.
type Machine struct {
	Group  string
	Self   string // the node running it: the group's home
	From   string // the home when it started
	To     string // the decision's home
	Kind   Kind
	Reason fsm.Reason // the home change's reason (from the decision's)
	Want   []string   // the decision's voters

	State State
	Err   string
	// Paused: the group is fenced here (publishes are held).
	Paused bool
	// Resume: the migration ended failed after a handover's switch
	// committed, with the group fenced here: the target must still be
	// handed the log, by a recovery from the fence record (the driver
	// schedules it).
	Resume bool
	// Committed: the handover's switch is known to have committed (the
	// record names the target at the switch's epoch).
	Committed bool
	// Epoch is a handover's switch's (the record's + 1 when it started).
	Epoch uint64
	// Decision is the index of the decision carried out (0: a recovery):
	// it names the handover to the target.
	Decision uint64

	rec     fsm.Group
	pending Action   // the action whose outcome is awaited
	queue   []Action // actions decided ahead (after a success)
	failing bool     // undoing after a failure: Err is set
}

// HomeReason maps a decision's reason to the home change's.
func HomeReason(r fsm.Reason) fsm.Reason {
	switch r {
	case fsm.ReasonViolation:
		return fsm.ReasonMigration
	case fsm.ReasonOverload:
		return fsm.ReasonRebalance
	}
	return r // manual, rebalance
}

// Plan plans the migration of rec towards its pending decision, run on
// node self (rec's home), and returns its first action. ok is false when
// there is nothing for self to do (no decision, or self is not the home).
func Plan(self string, rec fsm.Group) (m *Machine, first Action, ok bool) {
	d := rec.Desired
	if d == nil || rec.Home != self {
		return nil, Action{}, false
	}
	m = &Machine{Group: rec.ID, Self: self, From: rec.Home, To: d.Home, Reason: HomeReason(d.Reason),
		Want: slices.Clone(d.Voters), State: StateRunning, rec: rec, Decision: d.Index}
	switch {
	case d.Home == rec.Home:
		m.Kind = KindSettle
		m.queue = m.settleActions()
	case len(rec.Voters) == 1 && len(rec.Learners) == 0 && len(d.Voters) == 1 && !slices.Contains(rec.Voters, d.Home):
		m.Kind = KindHandover
		m.Epoch = rec.Epoch + 1
		// The switch commits while this node still serves: the target
		// serves only once it installed the tail, which is sent after
		// the fence, so the pause holds no metadata round.
		m.queue = []Action{
			{Op: OpSendSnapshot, Node: d.Home},
			{Op: OpProposeHome, Node: d.Home, Home: d.Home, Epoch: rec.Epoch + 1, Reason: m.Reason, Voters: []string{d.Home}},
			{Op: OpFence, Node: d.Home},
			{Op: OpSwitch, Node: d.Home, Home: d.Home, Epoch: rec.Epoch + 1},
			{Op: OpUnfence, Node: d.Home, Redirect: true},
			{Op: OpAwaitTarget, Node: d.Home},
		}
	default:
		m.Kind = KindReplicated
		m.queue = m.replicatedActions()
	}
	if len(m.queue) == 0 {
		m.State = StateDone
		return m, Action{}, true
	}
	return m, m.next(), true
}

// Recover plans the settling of a handover of group from self to to whose
// switch (at epoch) may have committed with the target not yet handed the
// whole log: self restarted during it, or its tail did not reach the
// target. The group is fenced here until the record says whose it is: the
// reclaim (the record unchanged at epoch) commits or conflicts with the
// switch; if the switch won, the log is handed over again whole.
func Recover(self, group, to string, epoch uint64, reason fsm.Reason) (*Machine, Action) {
	m := &Machine{Group: group, Self: self, From: self, To: to, Kind: KindRecover, Reason: reason, State: StateRunning,
		Paused: true, Err: "a handover to settle", Epoch: epoch}
	m.queue = []Action{
		{Op: OpProposeHome, Node: to, Home: self, Epoch: epoch, Reason: reason},
		{Op: OpFence, Node: to},
		{Op: OpSendSnapshot, Node: to},
		{Op: OpSwitch, Node: to, Home: to, Epoch: epoch},
		{Op: OpUnfence, Node: to, Redirect: true},
		{Op: OpAwaitTarget, Node: to},
	}
	return m, m.next()
}

func (m *Machine) replicatedActions() []Action {
	rec, to := m.rec, m.To
	var q []Action
	if !slices.Contains(rec.Voters, to) {
		learners := rec.Learners
		if !slices.Contains(learners, to) {
			learners = append(slices.Clone(learners), to)
			q = append(q, Action{Op: OpProposeMembers, Epoch: rec.Epoch, Voters: slices.Clone(rec.Voters), Learners: learners})
		}
		q = append(q,
			Action{Op: OpAddLearner, Node: to},
			Action{Op: OpAwaitCaughtUp, Node: to},
			Action{Op: OpPromote, Node: to},
			Action{Op: OpProposeMembers, Epoch: rec.Epoch, Voters: append(slices.Clone(rec.Voters), to), Learners: without(learners, to)},
		)
	}
	// The new home's keeper records it as home once it leads (with the
	// decision's reason), so the old home waits for that.
	return append(q,
		Action{Op: OpFence, Node: to},
		Action{Op: OpTransfer, Node: to},
		Action{Op: OpUnfence, Node: to, Redirect: true},
		Action{Op: OpAwaitTarget, Node: to},
	)
}

// settleActions removes, on the new home, the replicas the decision does
// not keep, then records the decided voters.
func (m *Machine) settleActions() []Action {
	rec := m.rec
	var q []Action
	for _, id := range append(slices.Clone(rec.Voters), rec.Learners...) {
		if !slices.Contains(m.Want, id) {
			q = append(q, Action{Op: OpRemove, Node: id})
		}
	}
	for _, id := range m.Want {
		if !slices.Contains(rec.Voters, id) {
			if !slices.Contains(rec.Learners, id) {
				q = append(q, Action{Op: OpProposeMembers, Epoch: rec.Epoch, Voters: slices.Clone(rec.Voters), Learners: append(slices.Clone(rec.Learners), id)})
			}
			q = append(q, Action{Op: OpAddLearner, Node: id}, Action{Op: OpAwaitCaughtUp, Node: id}, Action{Op: OpPromote, Node: id})
		}
	}
	return append(q, Action{Op: OpProposeMembers, Epoch: rec.Epoch, Voters: slices.Clone(m.Want), Learners: []string{}})
}

func without(ids []string, id string) []string {
	out := []string{}
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

func (m *Machine) next() Action {
	m.pending = m.queue[0]
	m.queue = m.queue[1:]
	switch m.pending.Op {
	case OpFence:
		m.Paused = true
	case OpUnfence:
		m.Paused = false
	}
	return m.pending
}

// Step takes the outcome of the pending action and returns the next one;
// ok is false when the migration has ended (State is done or failed).
func (m *Machine) Step(o Outcome) (Action, bool) {
	if m.State != StateRunning {
		return Action{}, false
	}
	a := m.pending
	if o.Record != nil {
		m.rec = *o.Record
	}
	if a.Op == OpProposeHome && a.Home == m.Self {
		return m.reclaimed(a, o)
	}
	if a.Op == OpProposeHome && a.Voters != nil && (o.Result == ResultOK ||
		o.Result == ResultConflict && o.Record != nil && o.Record.Home == a.Home && o.Record.Epoch == a.Epoch) {
		m.Committed = true
	}
	switch o.Result {
	case ResultOK:
	case ResultUnknown:
		if a.Op == OpProposeHome || a.Op == OpProposeMembers {
			// Proposed again: the epoch precondition makes a repeat
			// either commit once or conflict with the record it made.
			m.queue = append([]Action{a}, m.queue...)
			return m.next(), true
		}
		return m.fail(a, o)
	case ResultConflict:
		if a.Op == OpProposeHome && o.Record != nil && o.Record.Home == a.Home && o.Record.Epoch == a.Epoch {
			break // an earlier attempt committed
		}
		if a.Op == OpProposeMembers && o.Record != nil && o.Record.Epoch == a.Epoch &&
			sameSet(o.Record.Voters, a.Voters) && sameSet(o.Record.Learners, a.Learners) {
			break
		}
		return m.fail(a, o)
	default:
		return m.fail(a, o)
	}
	if m.failing && len(m.queue) == 0 {
		m.State = StateFailed
		return Action{}, false
	}
	if len(m.queue) == 0 {
		m.State = StateDone
		return Action{}, false
	}
	return m.next(), true
}

// reclaimed takes the outcome of the reclaim a (the record unchanged at
// the epoch of a switch whose outcome was unknown).
func (m *Machine) reclaimed(a Action, o Outcome) (Action, bool) {
	switch {
	case o.Result == ResultUnknown:
		m.queue = append([]Action{a}, m.queue...) // made again: it commits once or conflicts
		return m.next(), true
	case o.Result == ResultOK,
		o.Result == ResultConflict && o.Record != nil && o.Record.Home == m.Self && o.Record.Epoch >= a.Epoch:
		// The reclaim won (now or in an earlier attempt; or the record
		// names this node at a later epoch still): the switch cannot
		// commit; the group stays here.
		m.failing = true
		m.Err += "; the reclaim committed: the group stays here"
		m.queue = []Action{{Op: OpUnfence, Node: m.To}, {Op: OpAbort, Node: m.To}}
		return m.next(), true
	case o.Result == ResultConflict && o.Record != nil && o.Record.Home == m.To && o.Record.Epoch == a.Epoch:
		// The switch won: the group is the target's, which is handed
		// the whole log (fenced here) before it serves.
		m.Err = ""
		m.Committed = true
		return m.next(), true
	}
	// Another change, or a refusal (the group deleted): the record does
	// not name this node at the switch's epoch, so the group must not
	// take publishes here again; its batches are sent to whoever the
	// record names.
	to := m.To
	if o.Record != nil && o.Record.Home != "" {
		to = o.Record.Home
	}
	m.failing = true
	m.Err += "; then " + string(a.Op) + ": " + describe(o)
	m.queue = []Action{{Op: OpUnfence, Node: to, Redirect: true}}
	return m.next(), true
}

// fail ends the migration after a of the plan failed: what was done that
// must not stay (a fence, what the target was handed) is undone first.
func (m *Machine) fail(a Action, o Outcome) (Action, bool) {
	if m.failing {
		// An undo step failed: nothing more to do but report it.
		m.Err += "; then " + string(a.Op) + ": " + describe(o)
		m.State = StateFailed
		return Action{}, false
	}
	m.failing = true
	m.Err = string(a.Op) + ": " + describe(o)
	m.queue = nil
	if m.Committed && m.Paused {
		// A handover's switch committed, the tail not delivered: the
		// group is the target's, so nothing is undone (this node must
		// never take its publishes again, and the target must not be
		// told to drop its staging); it stays fenced and is resumed from
		// the fence record.
		m.Resume = true
		m.State = StateFailed
		return Action{}, false
	}
	if a.Op == OpAwaitTarget || (a.Op == OpUnfence && a.Redirect) {
		// The switch committed: the group is the target's; nothing to
		// undo (a target slow to serve is the target's business).
		m.State = StateFailed
		return Action{}, false
	}
	if m.Paused {
		// The record still names this node (a proposal refused for
		// another reason than a newer record naming the target): it
		// takes the group's publishes again.
		m.queue = append(m.queue, Action{Op: OpUnfence, Node: m.To})
	}
	if m.Kind == KindHandover {
		m.queue = append(m.queue, Action{Op: OpAbort, Node: m.To})
	}
	if len(m.queue) == 0 {
		m.State = StateFailed
		return Action{}, false
	}
	return m.next(), true
}

func describe(o Outcome) string {
	if o.Err != "" {
		return string(o.Result) + " (" + o.Err + ")"
	}
	return string(o.Result)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
