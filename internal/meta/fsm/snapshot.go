package fsm

import (
	"encoding/json"
	"fmt"
)

type snapshotV1 struct {
	V        int      `json:"v"`
	Applied  uint64   `json:"applied"`
	Nodes    []Node   `json:"nodes"`
	Policies Policies `json:"policies"`
}

// Snapshot encodes the state. The encoding is deterministic: nodes sorted by
// id, rules in order, times in UTC, so equal states give equal bytes.
func (s State) Snapshot() []byte {
	snap := snapshotV1{V: FormatVersion, Applied: s.applied, Nodes: s.Nodes(), Policies: s.Policies()}
	b, err := json.Marshal(snap)
	if err != nil {
		// Every value in a State passed validation, so it encodes.
		panic(fmt.Sprintf("fsm: snapshot of a validated state failed to encode: %v", err))
	}
	return b
}

// Restore decodes a snapshot and validates everything in it. Errors are
// *Error with code invalid.
func Restore(b []byte) (State, error) {
	var snap snapshotV1
	if err := decodeStrict(b, &snap); err != nil {
		return State{}, err
	}
	if snap.V != FormatVersion {
		return State{}, invalid("v", "unsupported snapshot version %d", snap.V)
	}
	s := State{applied: snap.Applied, nodes: make(map[string]Node, len(snap.Nodes))}
	if len(snap.Nodes) > MaxNodes {
		return State{}, invalid("nodes", "%d nodes, at most %d", len(snap.Nodes), MaxNodes)
	}
	for i, n := range snap.Nodes {
		field := fmt.Sprintf("nodes[%d]", i)
		if err := n.validate(field); err != nil {
			return State{}, err
		}
		if _, dup := s.nodes[n.ID]; dup {
			return State{}, invalid(field+".id", "duplicate node %q", n.ID)
		}
		n.JoinedAt = n.JoinedAt.UTC()
		s.nodes[n.ID] = n
	}
	if err := validateRules(snap.Policies.Rules); err != nil {
		return State{}, &Error{Code: err.Code, Field: "policies." + err.Field, Reason: err.Reason}
	}
	rules := make([]Rule, len(snap.Policies.Rules))
	for i, r := range snap.Policies.Rules {
		rules[i] = r.normalized()
	}
	s.policies = Policies{Version: snap.Policies.Version, Rules: rules}
	return s, nil
}
