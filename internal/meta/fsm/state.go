package fsm

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tiers.
const (
	TierEdge = "edge"
	TierCore = "core"
)

// Limits on the registry.
const (
	MaxNodes      = 10_000
	MaxIDBytes    = 128
	MaxLabelBytes = 256
)

// Labels are a node's announced properties.
type Labels struct {
	Site      string `json:"site,omitempty"`
	Zone      string `json:"zone,omitempty"`
	Tier      string `json:"tier"`
	MQTTAddr  string `json:"mqtt_addr,omitempty"`
	AdminAddr string `json:"admin_addr,omitempty"`
	PeerAddr  string `json:"peer_addr,omitempty"`
}

// Node is one registered node.
type Node struct {
	ID     string `json:"id"`
	Labels Labels `json:"labels"`
	// JoinedAt is when the node first registered, as stamped by the
	// proposer. Re-registering keeps it.
	JoinedAt time.Time `json:"joined_at"`
}

// Policies is the ordered rule list and its version, which every
// PutPolicies bumps. The implicit DefaultRule follows the list.
type Policies struct {
	Version uint64 `json:"version"`
	Rules   []Rule `json:"rules"`
}

// State is the metadata. The zero value is the empty state. A State is never
// modified after it is returned: Apply builds a new one.
type State struct {
	applied  uint64
	nodes    map[string]Node // never mutated once shared
	policies Policies        // Rules never mutated once shared
	groups   groupTable      // persistent: with/without copy a shard
}

// Applied is the log index of the last command applied.
func (s State) Applied() uint64 { return s.applied }

// Node returns the registered node id.
func (s State) Node(id string) (Node, bool) {
	n, ok := s.nodes[id]
	return n, ok
}

// Nodes returns the registered nodes sorted by id.
func (s State) Nodes() []Node {
	out := make([]Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Policies returns a copy of the rule list and its version.
func (s State) Policies() Policies {
	p := s.policies
	p.Rules = make([]Rule, len(s.policies.Rules))
	for i, r := range s.policies.Rules {
		p.Rules[i] = r.normalized() // deep-copies Retention
	}
	return p
}

// PoliciesVersion is the version of the rule list (Policies().Version,
// without copying the rules), for caches of what the rules decide.
func (s State) PoliciesVersion() uint64 { return s.policies.Version }

// RuleFor returns the first rule matching topic, or DefaultRule.
func (s State) RuleFor(topic string) Rule {
	for _, r := range s.policies.Rules {
		if Matches(r.Match, topic) {
			return r.normalized()
		}
	}
	return DefaultRule
}

// Result is what applying one command produced.
type Result struct {
	// Index is the log index the command was applied at.
	Index uint64 `json:"index"`
	// PoliciesVersion is the policy version after a successful PutPolicies.
	PoliciesVersion uint64 `json:"policies_version,omitempty"`
	// Group is the record a group command left: the new record after
	// create, set-home, set-members, set-desired and cancel-desired, or the
	// current one when they were refused with a conflict (create of an
	// existing group, a stale epoch, a pending manual decision), so the
	// proposer need not read it again.
	Group *Group `json:"group,omitempty"`
	// Error is set when the command was rejected; the state is then
	// unchanged apart from Applied.
	Error *Error `json:"error,omitempty"`
}

// Err returns the rejection as an error, or nil.
func (r Result) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Apply applies cmd as the command at log index and returns the new state
// and the result. s is not modified. A command that fails validation or a
// precondition is rejected through Result.Error and changes nothing but
// Applied.
func (s State) Apply(index uint64, cmd Command) (State, Result) {
	next := s
	next.applied = index
	res := Result{Index: index}
	if err := cmd.Validate(); err != nil {
		res.Error = err
		return next, res
	}
	switch cmd.Op {
	case OpRegisterNode:
		n := *cmd.Node
		n.JoinedAt = n.JoinedAt.UTC()
		if old, ok := s.nodes[n.ID]; ok {
			n.JoinedAt = old.JoinedAt
		} else if len(s.nodes) >= MaxNodes {
			res.Error = invalid("node", "registry full (%d nodes)", MaxNodes)
			return next, res
		}
		next.nodes = maps.Clone(s.nodes)
		if next.nodes == nil {
			next.nodes = map[string]Node{}
		}
		next.nodes[n.ID] = n
	case OpRemoveNode:
		if _, ok := s.nodes[cmd.NodeID]; !ok {
			res.Error = &Error{Code: CodeNotFound, Field: "node_id", Reason: "no node " + strconv.Quote(cmd.NodeID)}
			return next, res
		}
		next.nodes = maps.Clone(s.nodes)
		delete(next.nodes, cmd.NodeID)
	case OpPutPolicies:
		if cmd.ExpectVersion != nil && *cmd.ExpectVersion != s.policies.Version {
			res.Error = &Error{Code: CodeConflict, Field: "expect_version",
				Reason: "policies are at version " + strconv.FormatUint(s.policies.Version, 10)}
			return next, res
		}
		rules := make([]Rule, len(cmd.Rules))
		for i, r := range cmd.Rules {
			rules[i] = r.normalized()
		}
		next.policies = Policies{Version: s.policies.Version + 1, Rules: rules}
		res.PoliciesVersion = next.policies.Version
	case OpCreateGroup, OpSetGroupHome, OpSetGroupMembers, OpDeleteGroup:
		s.applyGroup(&next, &res, cmd)
	case OpSetGroupDesired, OpCancelGroupDesired:
		s.applyDesired(&next, &res, cmd)
	}
	return next, res
}

// validate checks a node's fields.
func (n Node) validate(field string) *Error {
	if err := validateID(n.ID); err != nil {
		return invalid(field+".id", "%s", err.Reason)
	}
	if err := validateTime(field+".joined_at", n.JoinedAt); err != nil {
		return err
	}
	l := n.Labels
	if l.Tier != TierEdge && l.Tier != TierCore {
		return invalid(field+".labels.tier", "must be %q or %q, not %q", TierEdge, TierCore, l.Tier)
	}
	for name, v := range map[string]string{"site": l.Site, "zone": l.Zone} {
		if len(v) > MaxLabelBytes || !printable(v) {
			return invalid(field+".labels."+name, "must be printable and at most %d bytes", MaxLabelBytes)
		}
	}
	for name, v := range map[string]string{"mqtt_addr": l.MQTTAddr, "admin_addr": l.AdminAddr, "peer_addr": l.PeerAddr} {
		if v != "" && !hostPort(v) {
			return invalid(field+".labels."+name, "%q is not host:port", v)
		}
	}
	return nil
}

// validateID accepts 1..MaxIDBytes of [A-Za-z0-9._:-].
func validateID(id string) *Error {
	if id == "" || len(id) > MaxIDBytes {
		return invalid("", "node id must be 1 to %d bytes", MaxIDBytes)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return invalid("", "node id %q may only contain letters, digits and . _ : -", id)
		}
	}
	return nil
}

func printable(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// hostPort checks "host:port" or "[v6]:port" with a port 1..65535.
func hostPort(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || len(s) > MaxLabelBytes || !printable(s) || strings.ContainsAny(s, " /") {
		return false
	}
	host, port := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") {
		return false
	}
	if !strings.HasPrefix(host, "[") && strings.Contains(host, ":") {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p >= 1 && p <= 65535 && strconv.Itoa(p) == port
}

// ApplyEncoded decodes an encoded command and applies it at index. An
// undecodable command is rejected like an invalid one: the state only
// records index as applied.
func (s State) ApplyEncoded(index uint64, b []byte) (State, Result) {
	cmd, err := DecodeCommand(b)
	if err != nil {
		next := s
		next.applied = index
		fe, ok := err.(*Error)
		if !ok {
			fe = invalid("", "%v", err)
		}
		return next, Result{Index: index, Error: fe}
	}
	return s.Apply(index, cmd)
}
