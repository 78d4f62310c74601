package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// FormatVersion is the version of the command encoding. Commands added
// since (the group commands) are new ops of the same version.
const FormatVersion = 1

// SnapshotVersion is the version of the snapshot encoding: 2 added the
// placement groups. Restore also reads version 1 (no groups).
const SnapshotVersion = 2

// MaxEncodedBytes bounds an encoded command or snapshot accepted by the
// decoders.
const MaxEncodedBytes = 16 << 20

// Op names a command.
type Op string

const (
	// OpRegisterNode adds a node or updates its labels (Node).
	OpRegisterNode Op = "register_node"
	// OpRemoveNode removes a node (NodeID).
	OpRemoveNode Op = "remove_node"
	// OpPutPolicies replaces the whole rule list (Rules), optionally only if
	// the current version is ExpectVersion.
	OpPutPolicies Op = "put_policies"
	// OpCreateGroup records a new placement group (Group); ErrConflict,
	// with the existing record in Result.Group, if it exists.
	OpCreateGroup Op = "create_group"
	// OpSetGroupHome moves a group's home (Home), epoch + 1.
	OpSetGroupHome Op = "set_group_home"
	// OpSetGroupMembers replaces a group's voters and learners (Members).
	OpSetGroupMembers Op = "set_group_members"
	// OpDeleteGroup removes a group's record (GroupID).
	OpDeleteGroup Op = "delete_group"
	// OpSetGroupDesired records a placement decision (Desired).
	OpSetGroupDesired Op = "set_group_desired"
	// OpCancelGroupDesired withdraws a pending decision (Cancel).
	OpCancelGroupDesired Op = "cancel_group_desired"
)

// Command is one change to the metadata. Each op takes its own fields and
// no other (Validate).
type Command struct {
	Op            Op             `json:"op"`
	Node          *Node          `json:"node,omitempty"`
	NodeID        string         `json:"node_id,omitempty"`
	Rules         []Rule         `json:"rules,omitempty"`
	ExpectVersion *uint64        `json:"expect_version,omitempty"`
	Group         *Group         `json:"group,omitempty"`
	GroupID       string         `json:"group_id,omitempty"`
	Home          *HomeChange    `json:"home,omitempty"`
	Members       *MembersChange `json:"members,omitempty"`
	Desired       *DesiredChange `json:"desired,omitempty"`
	Cancel        *DesiredCancel `json:"cancel,omitempty"`
}

// RegisterNode returns the command registering n.
func RegisterNode(n Node) Command { return Command{Op: OpRegisterNode, Node: &n} }

// RemoveNode returns the command removing node id.
func RemoveNode(id string) Command { return Command{Op: OpRemoveNode, NodeID: id} }

// PutPolicies returns the command replacing the rules unconditionally.
func PutPolicies(rules []Rule) Command { return Command{Op: OpPutPolicies, Rules: rules} }

// PutPoliciesIf returns the command replacing the rules if the current
// policy version is expect (compare-and-swap).
func PutPoliciesIf(rules []Rule, expect uint64) Command {
	return Command{Op: OpPutPolicies, Rules: rules, ExpectVersion: &expect}
}

// Validate checks the command without any state: the right fields for its
// op, and every field well formed.
func (c Command) Validate() *Error {
	switch c.Op {
	case OpRegisterNode:
		if !c.only("node") {
			return invalid("", "register_node takes node only")
		}
		return c.Node.validate("node")
	case OpRemoveNode:
		if !c.only("node_id") {
			return invalid("", "remove_node takes node_id only")
		}
		if err := validateID(c.NodeID); err != nil {
			return invalid("node_id", "%s", err.Reason)
		}
		return nil
	case OpPutPolicies:
		if !c.only("rules", "expect_version") {
			return invalid("", "put_policies takes rules and expect_version only")
		}
		return validateRules(c.Rules)
	case OpCreateGroup:
		if !c.only("group") {
			return invalid("", "create_group takes group only")
		}
		return c.Group.validateNew("group")
	case OpSetGroupHome:
		if !c.only("home") {
			return invalid("", "set_group_home takes home only")
		}
		return c.Home.validate("home")
	case OpSetGroupMembers:
		if !c.only("members") {
			return invalid("", "set_group_members takes members only")
		}
		return c.Members.validate("members")
	case OpDeleteGroup:
		if !c.only("group_id") {
			return invalid("", "delete_group takes group_id only")
		}
		if err := validateGroupID(c.GroupID); err != nil {
			return invalid("group_id", "%s", err.Reason)
		}
		return nil
	case OpSetGroupDesired:
		if !c.only("desired") {
			return invalid("", "set_group_desired takes desired only")
		}
		return c.Desired.validate("desired")
	case OpCancelGroupDesired:
		if !c.only("cancel") {
			return invalid("", "cancel_group_desired takes cancel only")
		}
		return c.Cancel.validate("cancel")
	case "":
		return invalid("op", "missing")
	}
	return invalid("op", "unknown op %q", c.Op)
}

// only reports whether the fields set are among allowed (by JSON name) and
// the first of them is set.
func (c Command) only(allowed ...string) bool {
	set := map[string]bool{
		"node": c.Node != nil, "node_id": c.NodeID != "", "rules": c.Rules != nil,
		"expect_version": c.ExpectVersion != nil, "group": c.Group != nil, "group_id": c.GroupID != "",
		"home": c.Home != nil, "members": c.Members != nil, "desired": c.Desired != nil, "cancel": c.Cancel != nil,
	}
	for _, name := range allowed {
		delete(set, name)
	}
	for _, on := range set {
		if on {
			return false
		}
	}
	switch allowed[0] {
	case "node":
		return c.Node != nil
	case "group":
		return c.Group != nil
	case "home":
		return c.Home != nil
	case "members":
		return c.Members != nil
	case "desired":
		return c.Desired != nil
	case "cancel":
		return c.Cancel != nil
	}
	return true // node_id, group_id: their own check says "missing"; rules may be empty
}

func validateRules(rules []Rule) *Error {
	if len(rules) > MaxRules {
		return invalid("rules", "%d rules, at most %d", len(rules), MaxRules)
	}
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		field := fmt.Sprintf("rules[%d]", i)
		if err := r.validate(field); err != nil {
			return err
		}
		if j, dup := seen[r.Match]; dup {
			return invalid(field+".match", "%q repeats rules[%d], which always wins", r.Match, j)
		}
		seen[r.Match] = i
	}
	return nil
}

type commandEnvelope struct {
	V int `json:"v"`
	Command
}

// EncodeCommand encodes a valid command.
func EncodeCommand(c Command) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.normalized()
	b, err := json.Marshal(commandEnvelope{V: FormatVersion, Command: c})
	if err != nil {
		return nil, fmt.Errorf("fsm: encode command: %w", err)
	}
	return b, nil
}

// DecodeCommand decodes and validates a command. Errors are *Error with
// code invalid.
func DecodeCommand(b []byte) (Command, error) {
	var env commandEnvelope
	if err := decodeStrict(b, &env); err != nil {
		return Command{}, err
	}
	if env.V != FormatVersion {
		return Command{}, invalid("v", "unsupported command version %d", env.V)
	}
	c := env.Command
	if err := c.Validate(); err != nil {
		return Command{}, err
	}
	return c.normalized(), nil
}

// normalized returns c with its times in UTC (and its own copies of the
// records holding them), so equal commands encode equally.
func (c Command) normalized() Command {
	if c.Node != nil {
		n := *c.Node
		n.JoinedAt = n.JoinedAt.UTC()
		c.Node = &n
	}
	if c.Group != nil {
		g := c.Group.clone().normalized()
		c.Group = &g
	}
	if c.Home != nil {
		h := *c.Home
		h.At = h.At.UTC()
		c.Home = &h
	}
	if c.Members != nil {
		m := *c.Members
		m.Voters, m.Learners = slices.Clone(m.Voters), slices.Clone(m.Learners)
		if len(m.Learners) == 0 {
			m.Learners = nil
		}
		c.Members = &m
	}
	if c.Desired != nil {
		d := *c.Desired
		d.At = d.At.UTC()
		d.Voters = slices.Clone(d.Voters)
		c.Desired = &d
	}
	if c.Cancel != nil {
		x := *c.Cancel
		c.Cancel = &x
	}
	return c
}

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(b []byte, v any) error {
	if len(b) > MaxEncodedBytes {
		return invalid("", "input larger than %d bytes", MaxEncodedBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("", "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "trailing data after the JSON value")
	}
	return nil
}
