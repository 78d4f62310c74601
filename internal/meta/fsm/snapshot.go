package fsm

import (
	"encoding/json"
	"fmt"
)

// snapshotJSON is the snapshot encoding. Version 1 had no groups; version
// 2 (SnapshotVersion) always has the key, possibly with an empty list.
type snapshotJSON struct {
	V        int      `json:"v"`
	Applied  uint64   `json:"applied"`
	Nodes    []Node   `json:"nodes"`
	Policies Policies `json:"policies"`
	Groups   *[]Group `json:"groups,omitempty"`
}

// Snapshot encodes the state (version SnapshotVersion). The encoding is
// deterministic: nodes and groups sorted by id, rules in order, times in
// UTC, so equal states give equal bytes.
func (s State) Snapshot() []byte {
	groups := s.groups.all()
	snap := snapshotJSON{V: SnapshotVersion, Applied: s.applied, Nodes: s.Nodes(), Policies: s.Policies(), Groups: &groups}
	b, err := json.Marshal(snap)
	if err != nil {
		// Every value in a State passed validation, so it encodes.
		panic(fmt.Sprintf("fsm: snapshot of a validated state failed to encode: %v", err))
	}
	return b
}

// Restore decodes a snapshot of version 1 or 2 and validates everything in
// it. Errors are *Error with code invalid.
func Restore(b []byte) (State, error) {
	var snap snapshotJSON
	if err := decodeStrict(b, &snap); err != nil {
		return State{}, err
	}
	switch {
	case snap.V == 1 && snap.Groups != nil:
		return State{}, invalid("groups", "version 1 snapshots have no groups")
	case snap.V == SnapshotVersion && snap.Groups == nil:
		return State{}, invalid("groups", "missing")
	case snap.V != 1 && snap.V != SnapshotVersion:
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
	if snap.Groups != nil {
		groups := *snap.Groups
		if len(groups) > MaxGroups {
			return State{}, invalid("groups", "%d groups, at most %d", len(groups), MaxGroups)
		}
		seen := make(map[string]bool, len(groups))
		for i, g := range groups {
			field := fmt.Sprintf("groups[%d]", i)
			if err := g.validateStored(field); err != nil {
				return State{}, err
			}
			if seen[g.ID] {
				return State{}, invalid(field+".id", "duplicate group %q", g.ID)
			}
			seen[g.ID] = true
			groups[i] = g.normalized()
		}
		s.groups = newGroupTable(groups)
	}
	return s, nil
}
