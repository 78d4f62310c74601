package logging

import (
	"bytes"
	"strings"
	"testing"
)

func env(journal string, dev, ino uint64) Env {
	return Env{
		Getenv: func(k string) string {
			if k == "JOURNAL_STREAM" {
				return journal
			}
			return ""
		},
		Stream: func() (uint64, uint64, bool) { return dev, ino, true },
	}
}

func TestJournalFormat(t *testing.T) {
	var b bytes.Buffer
	log, format := New(&b, "debug", "journal", Env{})
	if format != "journal" {
		t.Fatal(format)
	}
	log.Info("node serving", "node", "n1")
	log.Warn("slow")
	log.Error("broken", "err", "x")
	log.Debug("detail")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{`<6>level=INFO msg="node serving" node=n1`, `<4>level=WARN msg=slow`, `<3>level=ERROR msg=broken err=x`, `<7>level=DEBUG msg=detail`}
	if len(lines) != len(want) {
		t.Fatalf("lines %q", lines)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}
}

func TestAutoPicksJournalOnlyOnItsStream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     Env
		want    string
		stamped bool
	}{
		{"stderr is the journal", env("64769:123", 64769, 123), "journal", false},
		{"stderr redirected elsewhere", env("64769:123", 64769, 999), "text", true},
		{"no journal", env("", 1, 2), "text", true},
		{"garbage variable", env("yes", 1, 2), "text", true},
	} {
		var b bytes.Buffer
		log, format := New(&b, "info", "auto", tc.env)
		log.Info("hello")
		if format != tc.want {
			t.Errorf("%s: format %s, want %s", tc.name, format, tc.want)
		}
		if got := strings.Contains(b.String(), "time="); got != tc.stamped {
			t.Errorf("%s: timestamp present %v in %q", tc.name, got, b.String())
		}
	}
}

func TestJSONAndLevel(t *testing.T) {
	var b bytes.Buffer
	log, _ := New(&b, "warn", "json", Env{})
	log.Info("hidden")
	log.Warn("shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown"`) {
		t.Fatalf("%q", s)
	}
}
