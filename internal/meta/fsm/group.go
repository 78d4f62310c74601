package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on placement groups.
const (
	// MaxGroups bounds the groups the metadata holds.
	MaxGroups = 100_000
	// MaxGroupIDBytes is the longest group id: ids travel in the replication
	// layer's connection hello with a one-byte length.
	MaxGroupIDBytes = 255
	// MaxVoters bounds a group's voters: a rule asks for at most 5, and a
	// migration adds one before it removes one.
	MaxVoters = 7
	// MaxLearners bounds a group's learners (replicas catching up).
	MaxLearners = 4
)

// Reason says why a group's home changed.
type Reason string

const (
	// ReasonCreated: the home the group was created with.
	ReasonCreated Reason = "created"
	// ReasonFailover: a replica won an election after the home failed.
	ReasonFailover Reason = "failover"
	// ReasonMigration: the placement manager moved the group.
	ReasonMigration Reason = "migration"
	// ReasonManual: an operator moved the group.
	ReasonManual Reason = "manual"
	// ReasonRebalance: the home moved to spread load (shed from an
	// overloaded node).
	ReasonRebalance Reason = "rebalance"
)

// Group is a placement group: the sequenced topics that share one log, one
// home (the node that orders their messages, the Raft leader when the group
// is replicated) and one set of replicas.
type Group struct {
	// ID names the group: its rule's template expanded for a topic, or the
	// topic itself (Rule.GroupFor).
	ID string `json:"id"`
	// Rule is the Match of the policy rule the group was created under.
	// Rules may change later; the record keeps what it was made from.
	Rule string `json:"rule"`
	// Home is the node that orders the group's messages. It is always one
	// of Voters.
	Home string `json:"home"`
	// Voters are the replicas that count for commits and elections, the
	// home first when the group is created; Learners receive the log
	// without counting (a replica being added by a migration). Disjoint.
	Voters   []string `json:"voters"`
	Learners []string `json:"learners,omitempty"`
	// Epoch counts home changes, from 1: every set-home takes the current
	// epoch + 1, so an access node holding an older epoch knows its route
	// is stale.
	Epoch uint64 `json:"epoch"`
	// Retention is what the group's log keeps, resolved when the group is
	// created (the rule's, or the node default); zero fields are no bound.
	Retention Retention `json:"retention"`
	// Created is when the group was created, as stamped by the proposer.
	Created time.Time `json:"created"`
	// HomeReason and HomeSince say why and when the home last changed
	// (ReasonCreated and Created until it first moves); HomeSince is
	// stamped by the proposer.
	HomeReason Reason    `json:"home_reason"`
	HomeSince  time.Time `json:"home_since"`
	// Desired is the pending placement decision, if any (see Desired).
	Desired *Desired `json:"desired,omitempty"`
	// HandoverFrom is set when the current home got the group by a
	// handover from that node (HomeChange.HandoverFrom): the home opens
	// the group only on the log handed over for this epoch (a marker
	// beside the log, internal/replicas), never on a copy of its own. The
	// next home change clears it.
	HandoverFrom string `json:"handover_from,omitempty"`
}

// HomeChange moves a group's home (command set_group_home).
type HomeChange struct {
	Group string `json:"group"`
	Home  string `json:"home"`
	// Epoch must be the group's current epoch + 1.
	Epoch  uint64    `json:"epoch"`
	Reason Reason    `json:"reason"`
	At     time.Time `json:"at"` // stamped by the proposer
	// Handover, when set, replaces the voters with these (the new home
	// among them) and clears the learners in the same step: a group of one
	// replica moving to a node that holds none, whose log the old home
	// handed over before it proposed this (internal/migration). Without
	// it the new home must already be a voter.
	//
	// A change naming the current home only advances the epoch (the home's
	// reason and since stay): a migration whose switch's outcome is
	// unknown proposes it at the switch's epoch, so that exactly one of the
	// two commits.
	Handover []string `json:"handover,omitempty"`
	// HandoverFrom, with Handover, is the current home, which hands its
	// log over after this change commits (internal/migration): the new
	// home serves once the log is installed, not when the record names
	// it. Refused (conflict) if the home is no longer this node.
	HandoverFrom string `json:"handover_from,omitempty"`
}

// MembersChange replaces a group's voters and learners (command
// set_group_members), for migrations. The home must stay a voter.
type MembersChange struct {
	Group string `json:"group"`
	// Epoch must be the group's current epoch: a membership change does
	// not move the home, so it does not bump the epoch, but it is refused
	// if the home moved since the proposer read the record.
	Epoch    uint64   `json:"epoch"`
	Voters   []string `json:"voters"`
	Learners []string `json:"learners,omitempty"`
}

// GroupLoad is what one node carries of the placement groups.
type GroupLoad struct {
	Homes    int // groups it is the home of
	Replicas int // groups it is a voter or learner of (homes included)
}

// CreateGroup returns the command recording a new group. Epoch,
// HomeReason and HomeSince are set by the state machine (1, created,
// Created) and must be left zero.
func CreateGroup(g Group) Command { return Command{Op: OpCreateGroup, Group: &g} }

// SetGroupHome returns the command moving a group's home.
func SetGroupHome(c HomeChange) Command { return Command{Op: OpSetGroupHome, Home: &c} }

// SetGroupMembers returns the command replacing a group's replicas.
func SetGroupMembers(c MembersChange) Command { return Command{Op: OpSetGroupMembers, Members: &c} }

// DeleteGroup returns the command removing a group's record.
func DeleteGroup(id string) Command { return Command{Op: OpDeleteGroup, GroupID: id} }

// clone returns g with its own slices, so the caller may modify them.
func (g Group) clone() Group {
	g.Voters = slices.Clone(g.Voters)
	g.Learners = slices.Clone(g.Learners)
	if g.Desired != nil {
		d := *g.Desired
		d.Voters = slices.Clone(d.Voters)
		g.Desired = &d
	}
	return g
}

// normalized puts times in UTC so equal records encode equally.
func (g Group) normalized() Group {
	g.Created = g.Created.UTC()
	g.HomeSince = g.HomeSince.UTC()
	if len(g.Learners) == 0 {
		g.Learners = nil
	}
	if g.Desired != nil {
		d := *g.Desired
		d.At = d.At.UTC()
		g.Desired = &d
	}
	return g
}

// validate checks a create command's record: the fields the proposer
// sets, well formed, and the ones the state machine sets, zero.
func (g Group) validateNew(field string) *Error {
	if err := g.validateFields(field); err != nil {
		return err
	}
	switch {
	case g.Epoch != 0:
		return invalid(field+".epoch", "set by the state machine (1 at creation); leave it 0")
	case g.HomeReason != "":
		return invalid(field+".home_reason", "set by the state machine; leave it empty")
	case !g.HomeSince.IsZero():
		return invalid(field+".home_since", "set by the state machine; leave it empty")
	case g.Desired != nil:
		return invalid(field+".desired", "recorded by set_group_desired; leave it empty")
	case g.HandoverFrom != "":
		return invalid(field+".handover_from", "set by set_group_home; leave it empty")
	}
	return nil
}

// validateStored checks a record as the state holds it (in a snapshot).
func (g Group) validateStored(field string) *Error {
	if err := g.validateFields(field); err != nil {
		return err
	}
	if g.Epoch == 0 {
		return invalid(field+".epoch", "must be at least 1")
	}
	if err := validateReason(g.HomeReason, true); err != nil {
		return invalid(field+".home_reason", "%s", err.Reason)
	}
	if g.Desired != nil {
		if err := g.Desired.validateStored(field+".desired", g); err != nil {
			return err
		}
		if g.Desired.reached(&g) {
			return invalid(field+".desired", "equals the record: a reached decision is cleared")
		}
	}
	return validateTime(field+".home_since", g.HomeSince)
}

func (g Group) validateFields(field string) *Error {
	if err := validateGroupID(g.ID); err != nil {
		return invalid(field+".id", "%s", err.Reason)
	}
	if err := ValidateFilter(g.Rule); err != nil {
		return invalid(field+".rule", "%s", err.Reason)
	}
	if err := validateID(g.Home); err != nil {
		return invalid(field+".home", "%s", err.Reason)
	}
	if err := validateMembers(field, g.Voters, g.Learners); err != nil {
		return err
	}
	if !slices.Contains(g.Voters, g.Home) {
		return invalid(field+".home", "%q is not one of the voters", g.Home)
	}
	switch {
	case g.Retention.Messages < 0:
		return invalid(field+".retention.messages", "must not be negative")
	case g.Retention.Duration < 0:
		return invalid(field+".retention.duration", "must not be negative")
	}
	return validateTime(field+".created", g.Created)
}

// validateMembers checks voters (1..MaxVoters) and learners
// (0..MaxLearners): valid node ids, no repeats, disjoint.
func validateMembers(field string, voters, learners []string) *Error {
	if len(voters) == 0 || len(voters) > MaxVoters {
		return invalid(field+".voters", "%d voters, want 1 to %d", len(voters), MaxVoters)
	}
	if len(learners) > MaxLearners {
		return invalid(field+".learners", "%d learners, at most %d", len(learners), MaxLearners)
	}
	seen := make(map[string]string, len(voters)+len(learners))
	for _, list := range []struct {
		name string
		ids  []string
	}{{"voters", voters}, {"learners", learners}} {
		for i, id := range list.ids {
			f := fmt.Sprintf("%s.%s[%d]", field, list.name, i)
			if err := validateID(id); err != nil {
				return invalid(f, "%s", err.Reason)
			}
			if prev, dup := seen[id]; dup {
				return invalid(f, "%q repeats %s", id, prev)
			}
			seen[id] = f
		}
	}
	return nil
}

func (c HomeChange) validate(field string) *Error {
	if err := validateGroupID(c.Group); err != nil {
		return invalid(field+".group", "%s", err.Reason)
	}
	if err := validateID(c.Home); err != nil {
		return invalid(field+".home", "%s", err.Reason)
	}
	if c.Epoch < 2 {
		return invalid(field+".epoch", "must be the group's epoch + 1 (at least 2)")
	}
	if err := validateReason(c.Reason, false); err != nil {
		return invalid(field+".reason", "%s", err.Reason)
	}
	if c.Handover != nil {
		if err := validateMembers(field+".handover", c.Handover, nil); err != nil {
			return err
		}
		if !slices.Contains(c.Handover, c.Home) {
			return invalid(field+".handover", "%q is not one of the voters handed over to", c.Home)
		}
	}
	if c.HandoverFrom != "" {
		if c.Handover == nil {
			return invalid(field+".handover_from", "needs handover")
		}
		if c.HandoverFrom == c.Home {
			return invalid(field+".handover_from", "the new home cannot hand the group over to itself")
		}
	}
	return validateTime(field+".at", c.At)
}

func (c MembersChange) validate(field string) *Error {
	if err := validateGroupID(c.Group); err != nil {
		return invalid(field+".group", "%s", err.Reason)
	}
	if c.Epoch == 0 {
		return invalid(field+".epoch", "must be the group's current epoch (at least 1)")
	}
	return validateMembers(field, c.Voters, c.Learners)
}

// validateReason accepts the reasons a set-home may give, and "created"
// too when created is set (a stored record).
func validateReason(r Reason, created bool) *Error {
	switch r {
	case ReasonFailover, ReasonMigration, ReasonManual, ReasonRebalance:
		return nil
	case ReasonCreated:
		if created {
			return nil
		}
		return invalid("", "%q is set by the state machine; want failover, migration, manual or rebalance", r)
	case "":
		return invalid("", "missing; want failover, migration, manual or rebalance")
	}
	return invalid("", "unknown reason %q; want failover, migration, manual or rebalance", r)
}

func validateTime(field string, t time.Time) *Error {
	if t.IsZero() {
		return invalid(field, "missing")
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return invalid(field, "year %d out of range", y)
	}
	return nil
}

// validateGroupID accepts 1..MaxGroupIDBytes of valid UTF-8 without
// control characters: what the replication layer accepts as a group id.
func validateGroupID(id string) *Error {
	if !validGroupID(id) {
		return invalid("", "group id must be 1 to %d bytes of UTF-8 without control characters", MaxGroupIDBytes)
	}
	return nil
}

func validGroupID(id string) bool {
	if id == "" || len(id) > MaxGroupIDBytes || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// groupIDOf makes a group id from a template's expansion. Most expansions
// are ids already; one that is not (longer than MaxGroupIDBytes, empty, or
// with control characters, which MQTT topic names may hold) becomes its
// longest clean prefix of at most 200 bytes, "~" and 16 hex digits of its
// SHA-256. Two topics whose ids collide this way share a group, which is
// harmless: indexes are per topic, a group only shares a home and a log.
func groupIDOf(s string) string {
	if validGroupID(s) {
		return s
	}
	const keep = 200
	end := 0
	for i, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || i+utf8.RuneLen(r) > keep {
			break
		}
		end = i + utf8.RuneLen(r)
	}
	sum := sha256.Sum256([]byte(s))
	return s[:end] + "~" + hex.EncodeToString(sum[:8])
}

// GroupFor returns the placement group of a sequenced topic: the first
// rule matching the topic decides; ok is false when that rule (or the
// implicit default) is direct. The id is the rule's template expanded for
// the topic, or the topic itself when the rule has none (see
// Rule.GroupFor).
func (s State) GroupFor(topic string) (id string, r Rule, ok bool) {
	r = s.RuleFor(topic)
	if r.Mode != Sequenced {
		return "", r, false
	}
	return r.GroupFor(topic), r, true
}

// Group returns the record of group id.
func (s State) Group(id string) (Group, bool) {
	g, ok := s.groups.get(id)
	if !ok {
		return Group{}, false
	}
	return g.clone(), true
}

// Groups returns every group, sorted by id.
func (s State) Groups() []Group {
	out := s.groups.all()
	for i := range out {
		out[i] = out[i].clone()
	}
	return out
}

// GroupsByHome returns the groups whose home is node, sorted by id.
func (s State) GroupsByHome(node string) []Group {
	var out []Group
	s.groups.each(func(g *Group) {
		if g.Home == node {
			out = append(out, g.clone())
		}
	})
	slices.SortFunc(out, func(a, b Group) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// GroupLoad returns, for every node named by a group, how many groups it is
// the home and a replica of. Nodes carrying no group are absent.
func (s State) GroupLoad() map[string]GroupLoad {
	out := map[string]GroupLoad{}
	s.groups.each(func(g *Group) {
		h := out[g.Home]
		h.Homes++
		out[g.Home] = h
		for _, list := range [][]string{g.Voters, g.Learners} {
			for _, id := range list {
				l := out[id]
				l.Replicas++
				out[id] = l
			}
		}
	})
	return out
}

// GroupCount is the number of groups.
func (s State) GroupCount() int { return s.groups.n }

// applyGroup applies the group commands to next (a copy of s).
func (s State) applyGroup(next *State, res *Result, cmd Command) {
	switch cmd.Op {
	case OpCreateGroup:
		g := cmd.Group.normalized()
		if old, ok := s.groups.get(g.ID); ok {
			res.Error = &Error{Code: CodeConflict, Field: "group.id", Reason: "group " + strconv.Quote(g.ID) + " exists"}
			res.Group = ptrTo(old.clone())
			return
		}
		if s.groups.n >= MaxGroups {
			res.Error = invalid("group", "metadata full (%d groups)", MaxGroups)
			return
		}
		if err := s.registered("group", g.Voters, g.Learners); err != nil {
			res.Error = err
			return
		}
		g.Epoch, g.HomeReason, g.HomeSince = 1, ReasonCreated, g.Created
		next.groups = s.groups.with(g)
		res.Group = ptrTo(g.clone())
	case OpSetGroupHome:
		c := cmd.Home
		g, ok := s.groups.get(c.Group)
		if !ok {
			res.Error = &Error{Code: CodeNotFound, Field: "home.group", Reason: "no group " + strconv.Quote(c.Group)}
			return
		}
		if c.Epoch != g.Epoch+1 {
			res.Error = &Error{Code: CodeConflict, Field: "home.epoch", Reason: fmt.Sprintf("group is at epoch %d; a new home takes epoch %d", g.Epoch, g.Epoch+1)}
			res.Group = ptrTo(g.clone())
			return
		}
		if c.HandoverFrom != "" && c.HandoverFrom != g.Home {
			res.Error = &Error{Code: CodeConflict, Field: "home.handover_from", Reason: strconv.Quote(c.HandoverFrom) + " is not the group's home"}
			res.Group = ptrTo(g.clone())
			return
		}
		if c.Handover != nil {
			if err := s.registered("home.handover", c.Handover, nil); err != nil {
				res.Error = err
				return
			}
		} else if !slices.Contains(g.Voters, c.Home) {
			res.Error = &Error{Code: CodeConflict, Field: "home.home", Reason: strconv.Quote(c.Home) + " is not a voter of the group; add it first"}
			res.Group = ptrTo(g.clone())
			return
		}
		g = g.clone()
		if c.Handover != nil {
			g.Voters, g.Learners = slices.Clone(c.Handover), nil
		}
		if c.Home != g.Home {
			g.HomeReason, g.HomeSince = c.Reason, c.At.UTC()
		}
		g.Home, g.Epoch, g.HandoverFrom = c.Home, c.Epoch, c.HandoverFrom
		g.settle()
		next.groups = s.groups.with(g)
		res.Group = ptrTo(g.clone())
	case OpSetGroupMembers:
		c := cmd.Members
		g, ok := s.groups.get(c.Group)
		if !ok {
			res.Error = &Error{Code: CodeNotFound, Field: "members.group", Reason: "no group " + strconv.Quote(c.Group)}
			return
		}
		if c.Epoch != g.Epoch {
			res.Error = &Error{Code: CodeConflict, Field: "members.epoch", Reason: fmt.Sprintf("group is at epoch %d", g.Epoch)}
			res.Group = ptrTo(g.clone())
			return
		}
		if !slices.Contains(c.Voters, g.Home) {
			res.Error = &Error{Code: CodeConflict, Field: "members.voters", Reason: "the home " + strconv.Quote(g.Home) + " must stay a voter; move the home first"}
			res.Group = ptrTo(g.clone())
			return
		}
		if err := s.registered("members", c.Voters, c.Learners); err != nil {
			res.Error = err
			return
		}
		g = g.clone()
		g.Voters, g.Learners = slices.Clone(c.Voters), slices.Clone(c.Learners)
		if len(g.Learners) == 0 {
			g.Learners = nil
		}
		g.settle()
		next.groups = s.groups.with(g)
		res.Group = ptrTo(g.clone())
	case OpDeleteGroup:
		if _, ok := s.groups.get(cmd.GroupID); !ok {
			res.Error = &Error{Code: CodeNotFound, Field: "group_id", Reason: "no group " + strconv.Quote(cmd.GroupID)}
			return
		}
		next.groups = s.groups.without(cmd.GroupID)
	}
}

// registered checks that every node named is in the registry: a group is
// never created on (or moved to) a node the metadata does not know. Nodes
// removed later stay in the records until a migration replaces them.
func (s State) registered(field string, voters, learners []string) *Error {
	for _, list := range []struct {
		name string
		ids  []string
	}{{"voters", voters}, {"learners", learners}} {
		for i, id := range list.ids {
			if _, ok := s.nodes[id]; !ok {
				return &Error{Code: CodeNotFound, Field: fmt.Sprintf("%s.%s[%d]", field, list.name, i), Reason: "no node " + strconv.Quote(id)}
			}
		}
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// groupShards is how many maps the group table is split into, so that a
// command copies one shard (about 1/64 of the groups) instead of all.
const groupShards = 64

// groupTable is a persistent map of groups: with and without return a new
// table sharing every shard but the one changed, so State stays a value
// that Apply never modifies, at a cost per command of one shard's size.
type groupTable struct {
	shards *[groupShards]map[string]*Group // nil: empty; never mutated once shared
	n      int
}

// newGroupTable builds a table of groups (distinct ids).
func newGroupTable(groups []Group) groupTable {
	if len(groups) == 0 {
		return groupTable{}
	}
	var shards [groupShards]map[string]*Group
	for i := range groups {
		g := &groups[i]
		k := shardOf(g.ID)
		if shards[k] == nil {
			shards[k] = map[string]*Group{}
		}
		shards[k][g.ID] = g
	}
	return groupTable{shards: &shards, n: len(groups)}
}

func shardOf(id string) int {
	// FNV-1a: any fixed hash does, it only spreads the ids.
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return int(h % groupShards)
}

func (t groupTable) get(id string) (Group, bool) {
	if t.shards == nil {
		return Group{}, false
	}
	g, ok := t.shards[shardOf(id)][id]
	if !ok {
		return Group{}, false
	}
	return *g, true
}

// with returns a table holding g (added or replacing the record of its id).
func (t groupTable) with(g Group) groupTable {
	var shards [groupShards]map[string]*Group
	if t.shards != nil {
		shards = *t.shards
	}
	k := shardOf(g.ID)
	m := make(map[string]*Group, len(shards[k])+1)
	for id, v := range shards[k] {
		m[id] = v
	}
	if _, ok := m[g.ID]; !ok {
		t.n++
	}
	m[g.ID] = &g
	shards[k] = m
	t.shards = &shards
	return t
}

func (t groupTable) without(id string) groupTable {
	if _, ok := t.get(id); !ok {
		return t
	}
	shards := *t.shards
	k := shardOf(id)
	m := make(map[string]*Group, len(shards[k]))
	for gid, v := range shards[k] {
		if gid != id {
			m[gid] = v
		}
	}
	shards[k] = m
	t.shards = &shards
	t.n--
	return t
}

// each calls fn for every group, in no particular order; fn must not
// modify the record.
func (t groupTable) each(fn func(*Group)) {
	if t.shards == nil {
		return
	}
	for _, m := range t.shards {
		for _, g := range m {
			fn(g)
		}
	}
}

// all returns the records sorted by id (sharing their slices).
func (t groupTable) all() []Group {
	out := make([]Group, 0, t.n)
	t.each(func(g *Group) { out = append(out, *g) })
	slices.SortFunc(out, func(a, b Group) int { return strings.Compare(a.ID, b.ID) })
	return out
}
