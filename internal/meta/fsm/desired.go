package fsm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reasons of a placement decision (Desired.Reason) besides ReasonManual and
// ReasonRebalance, which home changes use too.
const (
	// ReasonViolation: the group's worst-case latency E(t) exceeded its
	// rule's threshold and a better home exists.
	ReasonViolation Reason = "violation"
	// ReasonOverload: the group was shed from an overloaded home.
	ReasonOverload Reason = "overload"
)

// Desired is a placement decision: where the placement manager, or an
// operator, wants a group to be. It is recorded in the group (Group.Desired)
// and consumed by the migration executor on the group's home, which works
// while the record differs from it: it adds the new replicas as learners,
// catches them up, moves the home (set_group_home, epoch + 1) and settles
// the voters (set_group_members). The state machine clears it when a
// set-home or set-members leaves the record equal to it (same home, same
// voters, no learners), so "desired != actual" is the executor's whole
// work list, and it survives a leader change or a restart.
type Desired struct {
	// Home is the desired home, one of Voters.
	Home string `json:"home"`
	// Voters is the desired replica set, the home among them.
	Voters []string `json:"voters"`
	// Reason is violation, overload, manual or rebalance.
	Reason Reason `json:"reason"`
	// At is when it was decided, as stamped by the proposer.
	At time.Time `json:"at"`
	// Epoch is the group's epoch when it was decided.
	Epoch uint64 `json:"epoch"`
	// Index is the metadata log index that recorded it, set by the state
	// machine: it names the decision (an executor's key, a cancel's
	// precondition).
	Index uint64 `json:"index"`
}

// DesiredChange records a placement decision (command set_group_desired).
// A decision equal to the group's current record cancels a pending one
// (the group is where it should be). A decision whose reason is not manual
// is refused while a manual one is pending: the operator's word stands
// until it is carried out or cancelled.
type DesiredChange struct {
	Group string `json:"group"`
	// Epoch must be the group's current epoch: a decision made on a record
	// whose home has moved since is refused (conflict, with the record).
	Epoch  uint64    `json:"epoch"`
	Home   string    `json:"home"`
	Voters []string  `json:"voters"`
	Reason Reason    `json:"reason"`
	At     time.Time `json:"at"`
}

// DesiredCancel withdraws a pending decision (command cancel_group_desired),
// if it is still the one recorded at Index: an executor that cannot carry
// it out (its target left), or an operator.
type DesiredCancel struct {
	Group string `json:"group"`
	Index uint64 `json:"index"`
}

// SetGroupDesired returns the command recording a placement decision.
func SetGroupDesired(c DesiredChange) Command { return Command{Op: OpSetGroupDesired, Desired: &c} }

// CancelGroupDesired returns the command withdrawing a pending decision.
func CancelGroupDesired(c DesiredCancel) Command {
	return Command{Op: OpCancelGroupDesired, Cancel: &c}
}

func (c DesiredChange) validate(field string) *Error {
	if err := validateGroupID(c.Group); err != nil {
		return invalid(field+".group", "%s", err.Reason)
	}
	if c.Epoch == 0 {
		return invalid(field+".epoch", "must be the group's current epoch (at least 1)")
	}
	if err := validateDesiredMembers(field, c.Home, c.Voters); err != nil {
		return err
	}
	if err := validateDecisionReason(c.Reason); err != nil {
		return invalid(field+".reason", "%s", err.Reason)
	}
	return validateTime(field+".at", c.At)
}

func (c DesiredCancel) validate(field string) *Error {
	if err := validateGroupID(c.Group); err != nil {
		return invalid(field+".group", "%s", err.Reason)
	}
	if c.Index == 0 {
		return invalid(field+".index", "must name the pending decision (its index, at least 1)")
	}
	return nil
}

// validateStored checks a decision as a group record holds it.
func (d Desired) validateStored(field string, g Group) *Error {
	if err := validateDesiredMembers(field, d.Home, d.Voters); err != nil {
		return err
	}
	if err := validateDecisionReason(d.Reason); err != nil {
		return invalid(field+".reason", "%s", err.Reason)
	}
	if d.Epoch == 0 || d.Epoch > g.Epoch {
		return invalid(field+".epoch", "must be 1 to the group's epoch %d", g.Epoch)
	}
	if d.Index == 0 {
		return invalid(field+".index", "must be at least 1")
	}
	return validateTime(field+".at", d.At)
}

func validateDesiredMembers(field, home string, voters []string) *Error {
	if err := validateID(home); err != nil {
		return invalid(field+".home", "%s", err.Reason)
	}
	if err := validateMembers(field, voters, nil); err != nil {
		return err
	}
	if !slices.Contains(voters, home) {
		return invalid(field+".home", "%q is not one of the voters", home)
	}
	return nil
}

func validateDecisionReason(r Reason) *Error {
	switch r {
	case ReasonViolation, ReasonOverload, ReasonManual, ReasonRebalance:
		return nil
	case "":
		return invalid("", "missing; want violation, overload, manual or rebalance")
	}
	return invalid("", "unknown reason %q; want violation, overload, manual or rebalance", r)
}

// reached reports whether g's record is what d asks for.
func (d *Desired) reached(g *Group) bool {
	return g.Home == d.Home && len(g.Learners) == 0 && sameSet(g.Voters, d.Voters)
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

// settle clears g's decision once the record matches it.
func (g *Group) settle() {
	if g.Desired != nil && g.Desired.reached(g) {
		g.Desired = nil
	}
}

// applyDesired applies set_group_desired and cancel_group_desired.
func (s State) applyDesired(next *State, res *Result, cmd Command) {
	if cmd.Op == OpCancelGroupDesired {
		c := cmd.Cancel
		g, ok := s.groups.get(c.Group)
		if !ok {
			res.Error = &Error{Code: CodeNotFound, Field: "cancel.group", Reason: "no group " + strconv.Quote(c.Group)}
			return
		}
		if g.Desired == nil || g.Desired.Index != c.Index {
			res.Error = &Error{Code: CodeConflict, Field: "cancel.index", Reason: "decision " + strconv.FormatUint(c.Index, 10) + " is not the one pending"}
			res.Group = ptrTo(g.clone())
			return
		}
		g = g.clone()
		g.Desired = nil
		next.groups = s.groups.with(g)
		res.Group = ptrTo(g.clone())
		return
	}
	c := cmd.Desired
	g, ok := s.groups.get(c.Group)
	if !ok {
		res.Error = &Error{Code: CodeNotFound, Field: "desired.group", Reason: "no group " + strconv.Quote(c.Group)}
		return
	}
	conflict := func(field, reason string) {
		res.Error = &Error{Code: CodeConflict, Field: field, Reason: reason}
		res.Group = ptrTo(g.clone())
	}
	if c.Epoch != g.Epoch {
		conflict("desired.epoch", fmt.Sprintf("group is at epoch %d", g.Epoch))
		return
	}
	if g.Desired != nil && g.Desired.Reason == ReasonManual && c.Reason != ReasonManual {
		conflict("desired.reason", "a manual decision (index "+strconv.FormatUint(g.Desired.Index, 10)+") is pending")
		return
	}
	if err := s.registered("desired", c.Voters, nil); err != nil {
		res.Error = err
		return
	}
	g = g.clone()
	g.Desired = &Desired{Home: c.Home, Voters: slices.Clone(c.Voters), Reason: c.Reason, At: c.At.UTC(), Epoch: c.Epoch, Index: res.Index}
	g.settle() // a decision for where the group is cancels the pending one
	next.groups = s.groups.with(g)
	res.Group = ptrTo(g.clone())
}

// Decisions returns the groups with a pending placement decision whose home
// is node (every group when node is ""), sorted by id: the migration
// executor's work list on that node.
func (s State) Decisions(node string) []Group {
	var out []Group
	s.groups.each(func(g *Group) {
		if g.Desired != nil && (node == "" || g.Home == node) {
			out = append(out, g.clone())
		}
	})
	slices.SortFunc(out, func(a, b Group) int { return strings.Compare(a.ID, b.ID) })
	return out
}
