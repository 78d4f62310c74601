package auth

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// FuzzParsePasswords: the parser never panics, and a file it accepts stays
// acceptable, with the same users plus one, after SetPassword.
func FuzzParsePasswords(f *testing.F) {
	h, err := bcrypt.GenerateFromPassword([]byte("fuzz"), bcrypt.MinCost)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("alice:" + string(h) + "\n# comment\n\nbob:" + string(h) + "\n"))
	f.Add([]byte("alice\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePasswords(bytes.NewReader(b))
		if err != nil {
			return
		}
		out, err := SetPassword(b, "fuzz-user", h)
		if err != nil {
			t.Fatalf("SetPassword on an accepted file: %v", err)
		}
		p2, err := ParsePasswords(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("SetPassword produced an unparsable file: %v\n%q", err, out)
		}
		want := map[string]bool{"fuzz-user": true}
		for _, u := range p.Users() {
			want[u] = true
		}
		got := p2.Users()
		if len(got) != len(want) {
			t.Fatalf("users %v, want %v", got, want)
		}
		for _, u := range got {
			if !want[u] {
				t.Fatalf("user %q appeared", u)
			}
		}
	})
}

// FuzzParseACL: the parser never panics, and the rules of an accepted file
// can be compiled and checked for any identity.
func FuzzParseACL(f *testing.F) {
	f.Add([]byte(sampleACL))
	f.Add([]byte("anonymous:\n  - {allow: publish, topic: a/%c/#}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseACL(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, user := range append([]string{"u"}, keys(a.users)...) {
			g := a.Grant(user, "c/+", false)
			for _, r := range a.Rules(user, false) {
				name := strings.NewReplacer("+", "x", "#", "y", "%u", user, "%c", "c").Replace(r.Topic)
				g.CanPublish(name)
				g.CanReceive(name)
				g.CanSubscribe(r.Topic)
			}
		}
	})
}

func keys(m map[string][]Rule) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
