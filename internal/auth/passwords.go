package auth

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Sentinel errors.
var (
	// ErrBadCredentials: an unknown user or a wrong password (the two are
	// deliberately not told apart).
	ErrBadCredentials = errors.New("auth: bad user name or password")
	// ErrNotAuthorized: the client presented no identity and anonymous
	// access is off.
	ErrNotAuthorized = errors.New("auth: not authorized")
	// ErrInvalidFile is wrapped by every parse error of a password or ACL file.
	ErrInvalidFile = errors.New("auth: invalid file")
)

// DefaultCost is the bcrypt cost `sextant passwd` uses unless told otherwise.
const DefaultCost = 11

// Passwords is a parsed password file: user names and their bcrypt hashes.
//
// The file has one "user:hash" entry per line; blank lines and lines
// starting with '#' are ignored. A user name is any UTF-8 text without
// ':', white space or control characters.
type Passwords struct {
	users map[string][]byte

	dummyOnce sync.Once
	dummy     []byte // compared against for unknown users, so both cost the same time
}

// ParsePasswords reads a password file.
func ParsePasswords(r io.Reader) (*Passwords, error) {
	p := &Passwords{users: map[string][]byte{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("%w: line %d: want user:hash", ErrInvalidFile, line)
		}
		if err := ValidUsername(user); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrInvalidFile, line, err)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("%w: line %d: user %q: not a bcrypt hash: %w", ErrInvalidFile, line, user, err)
		}
		if _, dup := p.users[user]; dup {
			return nil, fmt.Errorf("%w: line %d: user %q listed twice", ErrInvalidFile, line, user)
		}
		p.users[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFile, err)
	}
	return p, nil
}

// LoadPasswords reads the password file at path.
func LoadPasswords(path string) (*Passwords, error) {
	return loadFile(path, "password file", ParsePasswords)
}

// loadFile opens path and parses it; errors name the file (what) and path.
func loadFile[T any](path, what string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, fmt.Errorf("auth: %s: %w", what, err)
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return v, nil
}

// Verify checks user's password. It returns ErrBadCredentials for an unknown
// user and for a wrong password alike, after the same amount of work.
func (p *Passwords) Verify(user string, password []byte) error {
	hash, ok := p.users[user]
	if !ok {
		p.dummyOnce.Do(func() {
			cost := bcrypt.DefaultCost
			for _, h := range p.users {
				if c, err := bcrypt.Cost(h); err == nil {
					cost = c
				}
				break
			}
			p.dummy, _ = bcrypt.GenerateFromPassword([]byte("sextant: no such user"), cost)
		})
		_ = bcrypt.CompareHashAndPassword(p.dummy, password)
		return ErrBadCredentials
	}
	if bcrypt.CompareHashAndPassword(hash, password) != nil {
		return ErrBadCredentials
	}
	return nil
}

// Users returns the user names, sorted.
func (p *Passwords) Users() []string {
	out := make([]string, 0, len(p.users))
	for u := range p.users {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// ValidUsername checks that name can appear in a password file and an ACL.
func ValidUsername(name string) error {
	switch {
	case name == "":
		return errors.New("empty user name")
	case len(name) > 65535:
		return errors.New("user name longer than 65535 bytes")
	case !utf8.ValidString(name):
		return errors.New("user name is not valid UTF-8")
	}
	for _, r := range name {
		if r == ':' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("user name %q contains %q (no ':', white space or control characters)", name, r)
		}
	}
	return nil
}

// HashPassword returns the bcrypt hash of password at cost.
func HashPassword(password []byte, cost int) ([]byte, error) {
	if len(password) == 0 {
		return nil, errors.New("auth: empty password")
	}
	h, err := bcrypt.GenerateFromPassword(password, cost)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return h, nil
}

// SetPassword returns the password file content file with user's entry set
// to hash: the entry is replaced where it is, or appended. Other lines,
// comments included, are kept as they are.
func SetPassword(file []byte, user string, hash []byte) ([]byte, error) {
	if err := ValidUsername(user); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if _, err := bcrypt.Cost(hash); err != nil {
		return nil, fmt.Errorf("auth: not a bcrypt hash: %w", err)
	}
	entry := user + ":" + string(hash)
	lines, replaced := editLines(file, user, &entry)
	if !replaced {
		lines = append(lines, entry)
	}
	return joinLines(lines), nil
}

// DeleteUser returns file without user's entry, and whether there was one.
func DeleteUser(file []byte, user string) ([]byte, bool) {
	lines, found := editLines(file, user, nil)
	return joinLines(lines), found
}

// editLines replaces (entry non-nil) or removes the line of user.
func editLines(file []byte, user string, entry *string) ([]string, bool) {
	var out []string
	found := false
	for _, l := range strings.Split(strings.TrimRight(string(file), "\n"), "\n") {
		s := strings.TrimSpace(l)
		if u, _, ok := strings.Cut(s, ":"); ok && s != "" && s[0] != '#' && u == user {
			found = true
			if entry != nil {
				out = append(out, *entry)
			}
			continue
		}
		if l != "" || len(out) > 0 {
			out = append(out, l)
		}
	}
	return out, found
}

func joinLines(lines []string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
