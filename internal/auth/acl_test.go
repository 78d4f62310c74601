package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

const sampleACL = `
users:
  admin:
    - allow: both
      topic: "#"
    - allow: subscribe
      topic: $SYS/#
  alice:
    - deny: publish
      topic: devices/alice/config
authenticated:
  - allow: both
    topic: devices/%u/#
  - allow: publish
    topic: clients/%c/status
  - deny: subscribe
    topic: public/secret/#
  - allow: subscribe
    topic: public/#
anonymous:
  - allow: subscribe
    topic: public/#
  - allow: publish
    topic: anon/%c
  - allow: publish
    topic: anon/%u
`

func mustACL(t *testing.T, s string) *ACL {
	t.Helper()
	a, err := ParseACL(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestACLDecisions(t *testing.T) {
	a := mustACL(t, sampleACL)
	admin := a.Grant("admin", "console", false)
	alice := a.Grant("alice", "a-1", false)
	bob := a.Grant("bob", "b-1", false)
	anon := a.Grant("", "anon-1", true)

	type check struct {
		g    *Grant
		what string // pub, sub, recv
		arg  string
		want bool
	}
	for _, c := range []check{
		{admin, "pub", "anything/at/all", true},
		{admin, "sub", "#", true},
		{admin, "sub", "$SYS/#", true},
		{admin, "recv", "$SYS/broker/uptime", true},
		{admin, "pub", "$SYS/broker/uptime", false}, // "#" does not match $-topics
		// %u: each user gets its own subtree; first match wins.
		{alice, "pub", "devices/alice/temp", true},
		{alice, "pub", "devices/alice/config", false},
		{alice, "sub", "devices/alice/config", true},
		{alice, "pub", "devices/bob/temp", false},
		{bob, "pub", "devices/bob/config", true},
		{bob, "sub", "devices/bob/#", true},
		// A wildcard granted because it shares devices/bob/# with an
		// allow rule; the other devices' messages are withheld.
		{bob, "sub", "devices/#", true},
		{bob, "sub", "devices/+/temp", true},
		{bob, "recv", "devices/bob/temp", true},
		{bob, "recv", "devices/carol/temp", false},
		{bob, "sub", "devices/carol/#", false}, // shares nothing with an allow rule
		// %c
		{bob, "pub", "clients/b-1/status", true},
		{bob, "pub", "clients/a-1/status", false},
		{bob, "sub", "clients/b-1/status", false},
		// subscribe: deny must cover the whole filter, allow overlaps.
		{bob, "sub", "public/news", true},
		{bob, "sub", "public/#", true}, // partly denied: public/secret/ withheld per message
		{bob, "sub", "public/+/x", true},
		{bob, "sub", "public/secret/key", false},
		{bob, "sub", "public/secret/#", false},
		{bob, "sub", "public/secret/+/x", false},
		{bob, "recv", "public/news", true},
		{bob, "recv", "public/secret/key", false},
		{bob, "sub", "$share/g/public/news", true},
		{bob, "sub", "$share/g/devices/#", true},
		{bob, "sub", "$share/g/devices/carol/#", false},
		{bob, "sub", "$SYS/#", false},
		// anonymous rules only; %u never matches for anonymous clients.
		{anon, "sub", "public/#", true},
		{anon, "sub", "devices/#", false},
		{anon, "pub", "anon/anon-1", true},
		{anon, "pub", "anon/", false},
		{anon, "pub", "public/x", false},
	} {
		var got bool
		switch c.what {
		case "pub":
			got = c.g.CanPublish(c.arg)
		case "sub":
			got = c.g.CanSubscribe(c.arg)
		case "recv":
			got = c.g.CanReceive(c.arg)
		}
		if got != c.want {
			t.Errorf("%s(%q) %s %q = %v, want %v", c.g.User(), c.g.clientID, c.what, c.arg, got, c.want)
		}
	}
}

// TestUnsafeSubstitutionFailsClosed: a user name or client id that would
// turn a rule into a wildcard (or reach into $ topics, or another level)
// makes allow rules using it match nothing and deny rules match everything.
func TestUnsafeSubstitutionFailsClosed(t *testing.T) {
	a := mustACL(t, `
authenticated:
  - deny: publish
    topic: locked/%c
  - allow: publish
    topic: devices/%c/#
  - allow: publish
    topic: open/#
`)
	for _, id := range []string{"+", "#", "a/b", "$SYS", "x+y"} {
		g := a.Grant("u", id, false)
		if g.CanPublish("devices/" + id + "/x") {
			t.Errorf("client id %q: allow rule with %%c applied", id)
		}
		if g.CanPublish("devices/other/x") || g.CanPublish("open/x") {
			t.Errorf("client id %q: the deny rule with %%c did not fail closed", id)
		}
	}
	g := a.Grant("u", "fine", false)
	if !g.CanPublish("devices/fine/x") || !g.CanPublish("open/x") || g.CanPublish("locked/fine") {
		t.Error("a safe client id is not substituted")
	}
}

func TestParseACLRejects(t *testing.T) {
	for name, file := range map[string]string{
		"unknown key":      "user:\n  a: []\n",
		"allow and deny":   "anonymous:\n  - {allow: publish, deny: publish, topic: a}\n",
		"neither":          "anonymous:\n  - {topic: a}\n",
		"bad access":       "anonymous:\n  - {allow: read, topic: a}\n",
		"no topic":         "anonymous:\n  - {allow: publish}\n",
		"bad filter":       "anonymous:\n  - {allow: publish, topic: a/#/b}\n",
		"shared filter":    "anonymous:\n  - {allow: subscribe, topic: $share/g/a}\n",
		"bad user":         "users:\n  \"a b\":\n    - {allow: publish, topic: a}\n",
		"unknown rule key": "anonymous:\n  - {allow: publish, topic: a, qos: 1}\n",
		"not yaml":         "anonymous: [\n",
	} {
		if _, err := ParseACL(strings.NewReader(file)); !errors.Is(err, ErrInvalidFile) {
			t.Errorf("%s: err %v, want ErrInvalidFile", name, err)
		}
	}
	if a, err := ParseACL(strings.NewReader("")); err != nil || a.Grant("u", "c", false).CanPublish("x") {
		t.Fatalf("an empty ACL must parse and deny everything: %v", err)
	}
}

func TestGrantCacheIsBounded(t *testing.T) {
	g := mustACL(t, "anonymous:\n  - {allow: publish, topic: \"t/#\"}\n").Grant("", "c", true)
	for i := 0; i < 10*maxCached; i++ {
		if !g.CanPublish(fmt.Sprint("t/", i)) || g.CanPublish(fmt.Sprint("u/", i)) {
			t.Fatal("wrong decision")
		}
	}
	if n := len(g.mu.cache); n > maxCached {
		t.Fatalf("cache holds %d entries, bound %d", n, maxCached)
	}
}

func TestAuthenticate(t *testing.T) {
	h, _ := HashPassword([]byte("pw"), bcrypt.MinCost)
	pw, err := ParsePasswords(strings.NewReader("alice:" + string(h) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "drone-7"}, DNSNames: []string{"drone-7.fleet"}}
	cases := []struct {
		name string
		cfg  Config
		pw   *Passwords
		cr   Credentials
		user string
		err  error
	}{
		{"password", Config{}, pw, Credentials{Username: "alice", HasUsername: true, Password: []byte("pw"), HasPassword: true}, "alice", nil},
		{"wrong password", Config{}, pw, Credentials{Username: "alice", HasUsername: true, Password: []byte("no"), HasPassword: true}, "", ErrBadCredentials},
		{"no password", Config{}, pw, Credentials{Username: "alice", HasUsername: true}, "", ErrBadCredentials},
		{"unknown user", Config{AllowAnonymous: true}, pw, Credentials{Username: "mallory", HasUsername: true, Password: []byte("pw"), HasPassword: true}, "", ErrBadCredentials},
		{"anonymous refused", Config{}, pw, Credentials{}, "", ErrNotAuthorized},
		{"anonymous allowed", Config{AllowAnonymous: true}, pw, Credentials{}, "", nil},
		{"user name without password file is anonymous", Config{AllowAnonymous: true}, nil, Credentials{Username: "x", HasUsername: true}, "", nil},
		{"certificate cn", Config{CertIdentity: CertCN}, nil, Credentials{Cert: cert}, "drone-7", nil},
		{"certificate san", Config{CertIdentity: CertSAN}, nil, Credentials{Cert: cert}, "drone-7.fleet", nil},
		{"certificate and matching user name", Config{CertIdentity: CertCN}, nil, Credentials{Cert: cert, Username: "drone-7", HasUsername: true}, "drone-7", nil},
		{"certificate and other user name", Config{CertIdentity: CertCN}, pw, Credentials{Cert: cert, Username: "alice", HasUsername: true, Password: []byte("pw"), HasPassword: true}, "", ErrBadCredentials},
		{"certificate ignored without cert identity", Config{}, nil, Credentials{Cert: cert}, "", ErrNotAuthorized},
		{"no certificate falls back to password", Config{CertIdentity: CertCN}, pw, Credentials{Username: "alice", HasUsername: true, Password: []byte("pw"), HasPassword: true}, "alice", nil},
	}
	for _, c := range cases {
		a := NewAuthenticator(c.cfg, c.pw, nil)
		id, err := a.Authenticate(c.cr)
		if !errors.Is(err, c.err) || err == nil && id.User != c.user {
			t.Errorf("%s: got %+v %v, want user %q err %v", c.name, id, err, c.user, c.err)
		}
	}
	u, _ := url.Parse("spiffe://fleet/drone-9")
	if got := CertIdentity(&x509.Certificate{URIs: []*url.URL{u}}, CertSAN); got != "spiffe://fleet/drone-9" {
		t.Errorf("SAN URI identity %q", got)
	}
}

// TestGrantsFollowReload: a grant made before an ACL reload decides by the
// new rules afterwards.
func TestGrantsFollowReload(t *testing.T) {
	a := NewAuthenticator(Config{AllowAnonymous: true}, nil, mustACL(t, "anonymous:\n  - {allow: publish, topic: a}\n"))
	g := a.Grant(Identity{Method: MethodAnonymous}, "c")
	if !g.CanPublish("a") || g.CanPublish("b") {
		t.Fatal("before reload")
	}
	a.Reload(nil, mustACL(t, "anonymous:\n  - {allow: publish, topic: b}\n"))
	if g.CanPublish("a") || !g.CanPublish("b") {
		t.Fatal("the grant did not follow the reloaded ACL")
	}
	if NewAuthenticator(Config{}, nil, nil).Grant(Identity{}, "c") != nil {
		t.Fatal("a grant without an ACL")
	}
}

// BenchmarkGrant measures an ACL check on the publish path: a topic seen
// before (the cache) and a new topic each time (the rules).
func BenchmarkGrant(b *testing.B) {
	a, err := ParseACL(strings.NewReader(sampleACL))
	if err != nil {
		b.Fatal(err)
	}
	g := a.Grant("bob", "b-1", false)
	b.Run("cached", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			g.CanPublish("devices/bob/telemetry/temp")
		}
	})
	names := make([]string, 4096)
	for i := range names {
		names[i] = fmt.Sprintf("devices/bob/sensor-%d/temp", i)
	}
	b.Run("uncached", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			g.mu.Lock()
			g.mu.cache = nil
			g.mu.Unlock()
			g.CanPublish(names[i%len(names)])
		}
	})
}

func BenchmarkBcryptVerify(b *testing.B) {
	h, _ := HashPassword([]byte("pw"), DefaultCost)
	p, _ := ParsePasswords(strings.NewReader("u:" + string(h) + "\n"))
	for i := 0; i < b.N; i++ {
		_ = p.Verify("u", []byte("pw"))
	}
}

// TestOneDenyRuleDoesNotRefuseWildcards: with a deny rule for one topic
// before a rule allowing everything (a common test-suite ACL), a
// subscription to "#" is granted and the denied topic is withheld from it
// message by message; a subscription to the denied topic itself, or to a
// filter the deny rule covers, is refused.
func TestOneDenyRuleDoesNotRefuseWildcards(t *testing.T) {
	a := mustACL(t, `
anonymous:
  - deny: subscribe
    topic: test/nosubscribe
  - allow: both
    topic: "#"
`)
	g := a.Grant("", "c", true)
	for _, c := range []struct {
		filter string
		want   bool
	}{
		{"#", true}, {"test/#", true}, {"test/+", true}, {"+/nosubscribe", true},
		{"test/nosubscribe", false}, {"$share/g/#", true}, {"$share/g/test/nosubscribe", false},
	} {
		if got := g.CanSubscribe(c.filter); got != c.want {
			t.Errorf("subscribe %q = %v, want %v", c.filter, got, c.want)
		}
	}
	if g.CanReceive("test/nosubscribe") {
		t.Error("a message on the denied topic would be delivered")
	}
	if !g.CanReceive("test/other") || !g.CanPublish("test/nosubscribe") {
		t.Error("the deny rule reaches beyond subscribing to its topic")
	}
}
