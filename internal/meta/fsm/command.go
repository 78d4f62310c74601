package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// FormatVersion is the version of the command and snapshot encodings.
const FormatVersion = 1

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
)

// Command is one change to the metadata.
type Command struct {
	Op            Op      `json:"op"`
	Node          *Node   `json:"node,omitempty"`
	NodeID        string  `json:"node_id,omitempty"`
	Rules         []Rule  `json:"rules,omitempty"`
	ExpectVersion *uint64 `json:"expect_version,omitempty"`
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
	hasNode, hasID, hasRules := c.Node != nil, c.NodeID != "", c.Rules != nil || c.ExpectVersion != nil
	switch c.Op {
	case OpRegisterNode:
		if !hasNode || hasID || hasRules {
			return invalid("", "register_node takes node only")
		}
		return c.Node.validate("node")
	case OpRemoveNode:
		if hasNode || hasRules {
			return invalid("", "remove_node takes node_id only")
		}
		if err := validateID(c.NodeID); err != nil {
			return invalid("node_id", "%s", err.Reason)
		}
		return nil
	case OpPutPolicies:
		if hasNode || hasID {
			return invalid("", "put_policies takes rules and expect_version only")
		}
		return validateRules(c.Rules)
	case "":
		return invalid("op", "missing")
	}
	return invalid("op", "unknown op %q", c.Op)
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
	if c.Node != nil {
		n := *c.Node
		n.JoinedAt = n.JoinedAt.UTC()
		c.Node = &n
	}
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
	if c.Node != nil {
		c.Node.JoinedAt = c.Node.JoinedAt.UTC()
	}
	return c, nil
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
