package broker_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestWildcards checks + and # matching, including the rule that filters
// starting with a wildcard do not match topics starting with $.
func TestWildcards(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	filters := []string{"#", "+/b", "a/+", "a/#", "a/+/c", "+", "$x/#", "$x/+", "+/+", "a/b/#"}
	subs := map[string]*brokertest.Raw{}
	for _, f := range filters {
		r, _ := rawConnect(t, n, connect5("s "+f, true, 0))
		r.Subscribe(1, sub(f, 0))
		subs[f] = r
	}
	want := map[string][]string{ // topic -> filters that match it
		"a":     {"#", "+", "a/#"},
		"a/b":   {"#", "+/b", "a/+", "a/#", "+/+", "a/b/#"},
		"a/b/c": {"#", "a/#", "a/+/c", "a/b/#"},
		"x/b":   {"#", "+/b", "+/+"},
		"a/":    {"#", "a/+", "a/#", "+/+"},
		"$x/b":  {"$x/#", "$x/+"},
		"$x":    {"$x/#"},
		"/b":    {"#", "+/b", "+/+"},
	}
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	topics := make([]string, 0, len(want))
	for tp := range want {
		topics = append(topics, tp)
	}
	sort.Strings(topics)
	for _, tp := range topics {
		publishAcked(t, p, 1, pub(tp, 0, 0, tp))
	}
	for _, f := range filters {
		var got []string
		for _, pk := range drain(t, subs[f]) {
			got = append(got, pk.Topic)
		}
		var exp []string
		for _, tp := range topics {
			for _, g := range want[tp] {
				if g == f {
					exp = append(exp, tp)
				}
			}
		}
		if strings.Join(got, " ") != strings.Join(exp, " ") {
			t.Errorf("filter %q received %q, want %q", f, got, exp)
		}
	}
}

// TestSysTopics: $SYS statistics are published under $SYS/broker/ every
// sys-interval, as retained messages, and not matched by "#". Reading
// $SYS/ needs an ACL rule granting it.
func TestSysTopics(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.SysInterval = 50 * time.Millisecond
	cfg.ACLFile = filepath.Join(t.TempDir(), "acl.yaml")
	acl := "anonymous:\n  - {allow: subscribe, topic: $SYS/#}\n  - {allow: both, topic: \"#\"}\n  - {allow: both, topic: $d}\n"
	if err := os.WriteFile(cfg.ACLFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	n := brokertest.Start(t, cfg)
	all, _ := rawConnect(t, n, connect5("all", true, 0))
	all.Subscribe(1, sub("#", 0))
	s, _ := rawConnect(t, n, connect5("sys", true, 0))
	s.Subscribe(1, sub("$SYS/#", 0))
	// Read reports until one has counted both clients and every statistic
	// below has arrived (a report publishes its topics one by one, so the
	// one that counts both clients may still be on its way when its
	// connected count arrives).
	want := []string{"version", "uptime", "clients/connected", "subscriptions/count", "messages/received", "bytes/sent"}
	seen := map[string]bool{}
	both := false
	for !both || !seenAll(seen, want) {
		m := brokertest.Expect[*packet.Publish](s)
		if !strings.HasPrefix(m.Topic, "$SYS/broker/") {
			t.Fatalf("unexpected %s", packet.Describe(m))
		}
		seen[strings.TrimPrefix(m.Topic, "$SYS/broker/")] = true
		if m.Topic == "$SYS/broker/clients/connected" && string(m.Payload) == "2" {
			both = true
		}
	}
	// A new subscriber gets the statistics at once: they are retained.
	late, _ := rawConnect(t, n, connect5("late", true, 0))
	late.Subscribe(1, sub("$SYS/broker/version", 0))
	if m := brokertest.Expect[*packet.Publish](late); !m.Retain || !strings.HasPrefix(string(m.Payload), "sextant ") {
		t.Fatalf("retained $SYS version: %s", packet.Describe(m))
	}
	// "#" matched none of it.
	expectNothing(t, all, `"#" received a $SYS message`)
}

func seenAll(seen map[string]bool, want []string) bool {
	for _, w := range want {
		if !seen[w] {
			return false
		}
	}
	return true
}
