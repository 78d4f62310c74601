package fsm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Mode is how a topic's messages travel.
type Mode string

const (
	// Direct: from the publisher's access node straight to the nodes with
	// subscribers; no ordering across publishers, no history.
	Direct Mode = "direct"
	// Sequenced: through the topic's placement group home, which indexes
	// every message; history is kept within the rule's retention.
	Sequenced Mode = "sequenced"
)

// Spread says where a replicated group's replicas go.
type Spread string

const (
	SpreadZone Spread = "zone" // same site, different zones
	SpreadSite Spread = "site" // different sites
)

// Limits on policy rules.
const (
	MaxRules       = 1000
	MaxFilterBytes = 1024
	MaxLatencyMS   = 600_000
)

// Duration is a time.Duration written in JSON as a Go duration string
// ("36h", "15m30s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"24h\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Retention bounds a sequenced topic's history. A zero field is no bound of
// that kind; at least one must be set.
type Retention struct {
	Messages int64    `json:"messages,omitempty"`
	Duration Duration `json:"duration,omitempty"`
}

// Rule chooses how the topics matching a filter are handled. The first rule
// whose Match matches a topic applies.
type Rule struct {
	// Match is an MQTT topic filter (wildcards + and #).
	Match string `json:"match"`
	Mode  Mode   `json:"mode"`
	// LatencyMS is the worst-case publisher-to-subscriber latency the
	// topic must stay under (the placement threshold); 0 is none.
	LatencyMS int `json:"latency_ms,omitempty"`
	// Replicas of a sequenced topic's group: 1, 3 or 5 (0 on input means 1).
	Replicas int `json:"replicas,omitempty"`
	// Spread of the replicas when Replicas > 1 (default zone).
	Spread Spread `json:"spread,omitempty"`
	// Group names the placement group from the topic: "{n}" is the text
	// the n-th "+" of Match matched, e.g. Match "swarm/+/#" with Group
	// "swarm/{1}". Empty: one group per topic. Sequenced only.
	Group string `json:"group,omitempty"`
	// Retention of a sequenced topic's history; nil means the node default.
	Retention *Retention `json:"retention,omitempty"`
}

// DefaultRule applies to topics no stored rule matches.
var DefaultRule = Rule{Match: "#", Mode: Direct}

// normalized fills defaults so equal policies have equal encodings.
func (r Rule) normalized() Rule {
	if r.Mode == Sequenced {
		if r.Replicas == 0 {
			r.Replicas = 1
		}
		if r.Replicas > 1 && r.Spread == "" {
			r.Spread = SpreadZone
		}
	}
	if r.Retention != nil {
		ret := *r.Retention
		r.Retention = &ret
	}
	return r
}

// validate checks one rule; field is its path, e.g. "rules[2]".
func (r Rule) validate(field string) *Error {
	if err := ValidateFilter(r.Match); err != nil {
		return invalid(field+".match", "%s", err.Reason)
	}
	if strings.HasPrefix(r.Match, "$share/") {
		return invalid(field+".match", "a shared-subscription filter cannot select a policy")
	}
	switch r.Mode {
	case Direct, Sequenced:
	case "":
		return invalid(field+".mode", "missing; want %q or %q", Direct, Sequenced)
	default:
		return invalid(field+".mode", "unknown mode %q; want %q or %q", r.Mode, Direct, Sequenced)
	}
	if r.LatencyMS < 0 || r.LatencyMS > MaxLatencyMS {
		return invalid(field+".latency_ms", "must be between 1 and %d (or absent)", MaxLatencyMS)
	}
	if r.Mode == Direct {
		switch {
		case r.Replicas > 1:
			return invalid(field+".replicas", "direct topics are not replicated; use mode sequenced")
		case r.Replicas < 0:
			return invalid(field+".replicas", "must be 1, 3 or 5")
		case r.Spread != "":
			return invalid(field+".spread", "direct topics are not replicated")
		case r.Group != "":
			return invalid(field+".group", "direct topics have no placement group")
		case r.Retention != nil:
			return invalid(field+".retention", "direct topics keep no history")
		}
		return nil
	}
	switch r.Replicas {
	case 0, 1, 3, 5:
	default:
		return invalid(field+".replicas", "must be 1, 3 or 5, not %d", r.Replicas)
	}
	switch r.Spread {
	case "", SpreadZone, SpreadSite:
	default:
		return invalid(field+".spread", "unknown spread %q; want %q or %q", r.Spread, SpreadZone, SpreadSite)
	}
	if r.Spread != "" && r.Replicas <= 1 {
		return invalid(field+".spread", "needs replicas 3 or 5")
	}
	if r.Group != "" {
		if err := validateGroup(r.Group, strings.Count(r.Match, "+")); err != nil {
			return invalid(field+".group", "%s", err.Reason)
		}
	}
	if ret := r.Retention; ret != nil {
		switch {
		case ret.Messages < 0:
			return invalid(field+".retention.messages", "must not be negative")
		case ret.Duration < 0:
			return invalid(field+".retention.duration", "must not be negative")
		case ret.Messages == 0 && ret.Duration == 0:
			return invalid(field+".retention", "set messages, duration or both")
		}
	}
	return nil
}

// ValidateFilter checks an MQTT topic filter: non-empty, valid UTF-8 without
// NUL, at most MaxFilterBytes, "#" only as the whole last level and "+" only
// as a whole level.
func ValidateFilter(f string) *Error {
	switch {
	case f == "":
		return invalid("", "empty topic filter")
	case len(f) > MaxFilterBytes:
		return invalid("", "topic filter longer than %d bytes", MaxFilterBytes)
	case !utf8.ValidString(f):
		return invalid("", "topic filter is not valid UTF-8")
	case strings.ContainsRune(f, 0):
		return invalid("", "topic filter contains NUL")
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return invalid("", "%q: # must be the whole last level", f)
		}
		if strings.Contains(l, "+") && l != "+" {
			return invalid("", "%q: + must be a whole level", f)
		}
	}
	return nil
}

// validateGroup checks a group template against the number of "+" levels of
// its rule's filter.
func validateGroup(g string, plus int) *Error {
	if len(g) > MaxFilterBytes || !utf8.ValidString(g) || strings.ContainsRune(g, 0) {
		return invalid("", "group must be valid UTF-8 of at most %d bytes", MaxFilterBytes)
	}
	if strings.ContainsAny(g, "+#") {
		return invalid("", "group %q contains a wildcard", g)
	}
	rest := g
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			break
		}
		if rest[open] == '}' {
			return invalid("", "group %q has an unmatched }", g)
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return invalid("", "group %q has an unmatched {", g)
		}
		n, err := strconv.Atoi(rest[open+1 : open+end])
		if err != nil || n < 1 || strconv.Itoa(n) != rest[open+1:open+end] {
			return invalid("", "group %q: placeholders are {1}, {2}, ...", g)
		}
		if n > plus {
			return invalid("", "group %q uses {%d} but the filter has %d + level(s)", g, n, plus)
		}
		rest = rest[open+end+1:]
	}
	return nil
}

// Matches reports whether the topic name matches the filter, with MQTT's
// rule that wildcards at the first level do not match topics starting "$".
func Matches(filter, topic string) bool {
	_, ok := captures(filter, topic)
	return ok
}

// captures matches topic against filter and returns what each "+" matched.
func captures(filter, topic string) ([]string, bool) {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return nil, false
	}
	fl := strings.Split(filter, "/")
	tl := strings.Split(topic, "/")
	var caps []string
	for i, f := range fl {
		if f == "#" {
			return caps, true // also matches the parent level: "a/#" matches "a"
		}
		if i >= len(tl) {
			return nil, false
		}
		switch f {
		case "+":
			caps = append(caps, tl[i])
		case tl[i]:
		default:
			return nil, false
		}
	}
	return caps, len(fl) == len(tl)
}

// GroupFor returns the placement group id of a topic this rule matched:
// the topic itself when Group is empty, else Group with its placeholders
// filled from the topic. An expansion that is not a valid group id (over
// MaxGroupIDBytes, empty, or holding control characters) is shortened to
// one with a hash of it (see groupIDOf), so every topic has a group.
func (r Rule) GroupFor(topic string) string {
	if r.Group == "" {
		return groupIDOf(topic)
	}
	caps, ok := captures(r.Match, topic)
	if !ok {
		return groupIDOf(topic)
	}
	var b strings.Builder
	rest := r.Group
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(rest)
			return groupIDOf(b.String())
		}
		end := strings.IndexByte(rest[open:], '}')
		b.WriteString(rest[:open])
		n, _ := strconv.Atoi(rest[open+1 : open+end])
		if n >= 1 && n <= len(caps) {
			b.WriteString(caps[n-1])
		}
		rest = rest[open+end+1:]
	}
}
