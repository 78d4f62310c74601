package auth

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// hash is a cheap bcrypt hash for tests.
func hash(t testing.TB, pw string) string {
	t.Helper()
	h, err := HashPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestPasswordsVerify(t *testing.T) {
	file := "# users\n\nalice:" + hash(t, "wonderland") + "\n  bob:" + hash(t, "builder") + "  \r\n"
	p, err := ParsePasswords(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Users(); len(got) != 2 || got[0] != "alice" || got[1] != "bob" {
		t.Fatalf("users %v", got)
	}
	if err := p.Verify("alice", []byte("wonderland")); err != nil {
		t.Fatalf("right password refused: %v", err)
	}
	if err := p.Verify("bob", []byte("builder")); err != nil {
		t.Fatalf("right password refused: %v", err)
	}
	for _, c := range []struct{ user, pw string }{{"alice", "builder"}, {"alice", ""}, {"carol", "wonderland"}, {"", ""}} {
		if err := p.Verify(c.user, []byte(c.pw)); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("Verify(%q, %q) = %v, want ErrBadCredentials", c.user, c.pw, err)
		}
	}
}

func TestParsePasswordsRejects(t *testing.T) {
	h := hash(t, "x")
	for name, file := range map[string]string{
		"no colon":       "alice\n",
		"not bcrypt":     "alice:secret\n",
		"empty user":     ":" + h + "\n",
		"space in user":  "al ice:" + h + "\n",
		"duplicate user": "a:" + h + "\na:" + h + "\n",
	} {
		_, err := ParsePasswords(strings.NewReader(file))
		if !errors.Is(err, ErrInvalidFile) {
			t.Errorf("%s: err %v, want ErrInvalidFile", name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: error does not name the line: %v", name, err)
		}
	}
}

func TestSetPasswordAndDeleteUser(t *testing.T) {
	h1, h2, h3 := hash(t, "one"), hash(t, "two"), hash(t, "three")
	file := []byte("# managed by sextant passwd\nalice:" + h1 + "\nbob:" + h2 + "\n")
	out, err := SetPassword(file, "alice", []byte(h3))
	if err != nil {
		t.Fatal(err)
	}
	want := "# managed by sextant passwd\nalice:" + h3 + "\nbob:" + h2 + "\n"
	if string(out) != want {
		t.Fatalf("replace:\n%s\nwant\n%s", out, want)
	}
	out, err = SetPassword(out, "carol", []byte(h1))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(out), "bob:"+h2+"\ncarol:"+h1+"\n") {
		t.Fatalf("append:\n%s", out)
	}
	if out2, err := SetPassword(nil, "dave", []byte(h1)); err != nil || string(out2) != "dave:"+h1+"\n" {
		t.Fatalf("new file: %q %v", out2, err)
	}
	if _, err := SetPassword(out, "bad:name", []byte(h1)); err == nil {
		t.Fatal("a user name with ':' was accepted")
	}
	if _, err := SetPassword(out, "eve", []byte("plain")); err == nil {
		t.Fatal("a non-bcrypt hash was accepted")
	}
	out, found := DeleteUser(out, "bob")
	if !found || strings.Contains(string(out), "bob:") {
		t.Fatalf("delete: %v\n%s", found, out)
	}
	if _, found := DeleteUser(out, "nobody"); found {
		t.Fatal("deleted a user that does not exist")
	}
	p, err := ParsePasswords(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify("alice", []byte("three")); err != nil {
		t.Fatal(err)
	}
	if err := p.Verify("carol", []byte("one")); err != nil {
		t.Fatal(err)
	}
}
