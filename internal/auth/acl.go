package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sextantmq/sextant/internal/topic"
)

// Access is what a rule is about: publishing, subscribing (which includes
// receiving), or both.
type Access uint8

// Access values.
const (
	Publish Access = 1 << iota
	Subscribe
	Both = Publish | Subscribe
)

func (a Access) String() string {
	switch a {
	case Publish:
		return "publish"
	case Subscribe:
		return "subscribe"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Access(%d)", uint8(a))
}

func parseAccess(s string) (Access, error) {
	switch s {
	case "publish":
		return Publish, nil
	case "subscribe":
		return Subscribe, nil
	case "both":
		return Both, nil
	}
	return 0, fmt.Errorf("%q is not publish, subscribe or both", s)
}

// Rule is one line of an ACL: allow or deny an access on the topics of a
// filter. The filter may contain %u (the user name) and %c (the client
// identifier), substituted for each client.
type Rule struct {
	Allow  bool
	Access Access
	Topic  string
}

func (r Rule) String() string {
	verb := "deny"
	if r.Allow {
		verb = "allow"
	}
	return fmt.Sprintf("%s %s %s", verb, r.Access, r.Topic)
}

// ACL is a parsed access control list. Once configured, access is denied
// unless a rule allows it.
//
// The file is YAML:
//
//	users:                 # each user's own rules, checked first
//	  alice:
//	    - allow: both      # publish, subscribe or both
//	      topic: "#"
//	    - allow: subscribe
//	      topic: $SYS/#
//	authenticated:         # then these, for every authenticated user
//	  - deny: publish
//	    topic: devices/%u/config
//	  - allow: both
//	    topic: devices/%u/#
//	anonymous:             # the only rules of clients without a user name
//	  - allow: subscribe
//	    topic: public/#
//
// Each rule has exactly one of allow or deny, and a topic filter. Rules are
// checked in order and the first that applies decides. A publish (and a
// message delivered to a subscriber) is checked by topic name: a rule applies
// when its filter matches the name. A subscription is checked by filter: a
// deny rule applies when it covers every topic the subscription can match,
// an allow rule when the two filters share any topic; what a granted
// wildcard subscription matches on denied topics is withheld message by
// message. Filters starting with a wildcard never match topics starting
// with '$' (MQTT's rule), so "#" does not grant $SYS/.
type ACL struct {
	users         map[string][]Rule
	authenticated []Rule
	anonymous     []Rule
}

type ruleYAML struct {
	Allow string `yaml:"allow"`
	Deny  string `yaml:"deny"`
	Topic string `yaml:"topic"`
}

type aclYAML struct {
	Users         map[string][]ruleYAML `yaml:"users"`
	Authenticated []ruleYAML            `yaml:"authenticated"`
	Anonymous     []ruleYAML            `yaml:"anonymous"`
}

// ParseACL reads an ACL file (see ACL). Unknown keys are errors.
func ParseACL(r io.Reader) (*ACL, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFile, err)
	}
	var y aclYAML
	if len(bytes.TrimSpace(data)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidFile, err)
		}
	}
	a := &ACL{users: map[string][]Rule{}}
	if a.authenticated, err = parseRules("authenticated", y.Authenticated); err != nil {
		return nil, err
	}
	if a.anonymous, err = parseRules("anonymous", y.Anonymous); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(y.Users))
	for u := range y.Users {
		names = append(names, u)
	}
	sort.Strings(names) // report the first bad user deterministically
	for _, u := range names {
		if err := ValidUsername(u); err != nil {
			return nil, fmt.Errorf("%w: users: %w", ErrInvalidFile, err)
		}
		if a.users[u], err = parseRules("users: "+u, y.Users[u]); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func parseRules(where string, in []ruleYAML) ([]Rule, error) {
	out := make([]Rule, 0, len(in))
	for i, ry := range in {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: rule %d: %s", ErrInvalidFile, where, i+1, fmt.Sprintf(format, args...))
		}
		var r Rule
		verb := ry.Allow
		switch {
		case ry.Allow != "" && ry.Deny != "":
			return nil, bad("has both allow and deny")
		case ry.Allow != "":
			r.Allow = true
		case ry.Deny != "":
			verb = ry.Deny
		default:
			return nil, bad("needs allow or deny")
		}
		acc, err := parseAccess(verb)
		if err != nil {
			return nil, bad("%s", err.Error())
		}
		r.Access = acc
		if err := checkRuleFilter(ry.Topic); err != nil {
			return nil, bad("topic %q: %s", ry.Topic, err.Error())
		}
		r.Topic = ry.Topic
		out = append(out, r)
	}
	return out, nil
}

// checkRuleFilter validates a rule's filter with its placeholders filled in.
func checkRuleFilter(f string) error {
	if f == "" {
		return errors.New("missing")
	}
	if strings.HasPrefix(f, topic.SharePrefix) || f == "$share" {
		return errors.New("a rule names topics, not a shared subscription (the $share/group/ prefix is removed before checking)")
	}
	return topic.ValidateFilter(strings.NewReplacer("%u", "x", "%c", "x").Replace(f))
}

// LoadACL reads the ACL file at path.
func LoadACL(path string) (*ACL, error) { return loadFile(path, "ACL file", ParseACL) }

// Rules returns the rules checked for a client, in order: an authenticated
// user's own rules then the authenticated rules, or the anonymous rules.
func (a *ACL) Rules(user string, anonymous bool) []Rule {
	if anonymous {
		return a.anonymous
	}
	own := a.users[user]
	out := make([]Rule, 0, len(own)+len(a.authenticated))
	return append(append(out, own...), a.authenticated...)
}

// compiled is a rule with %u and %c filled in for one client.
type compiled struct {
	allow  bool
	access Access
	filter string
	// poisoned: a placeholder's value could not be substituted safely (it
	// is empty, contains '/', '+', '#' or NUL, or starts with '$'). Such a
	// rule fails closed: as an allow rule it matches nothing, as a deny
	// rule it matches everything.
	poisoned bool
}

func compile(rules []Rule, user, clientID string) []compiled {
	out := make([]compiled, len(rules))
	for i, r := range rules {
		c := compiled{allow: r.Allow, access: r.Access, filter: r.Topic}
		if strings.Contains(r.Topic, "%") {
			if strings.Contains(r.Topic, "%u") && !safeValue(user) || strings.Contains(r.Topic, "%c") && !safeValue(clientID) {
				c.poisoned = true
			} else {
				c.filter = strings.NewReplacer("%u", user, "%c", clientID).Replace(r.Topic)
			}
		}
		out[i] = c
	}
	return out
}

func safeValue(v string) bool {
	return v != "" && v[0] != '$' && !strings.ContainsAny(v, "/+#\x00")
}

// decideName checks a topic name against rules for access acc.
func decideName(rules []compiled, acc Access, name string) bool {
	for i := range rules {
		r := &rules[i]
		if r.access&acc == 0 {
			continue
		}
		if r.poisoned {
			if r.allow {
				continue
			}
			return false
		}
		if topic.Match(r.filter, name) {
			return r.allow
		}
	}
	return false
}

// decideFilter checks a subscription's (non-shared) filter against rules;
// the first rule that applies decides. A deny rule applies when it covers
// the whole filter: the subscription could receive nothing. A deny rule
// that covers only part of it does not: the messages on the topics it
// denies are withheld one by one as they are delivered (decideName, through
// Grant.CanReceive), so that one deny rule does not refuse every wildcard
// subscriber. An allow rule applies when it shares a topic with the filter.
func decideFilter(rules []compiled, f string) bool {
	for i := range rules {
		r := &rules[i]
		if r.access&Subscribe == 0 {
			continue
		}
		switch {
		case r.poisoned && r.allow:
		case r.poisoned:
			return false
		case !r.allow && covers(r.filter, f):
			return false
		case r.allow && topic.Overlap(r.filter, f):
			return true
		}
	}
	return false
}
