package adminapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Scope is what a bearer token allows.
type Scope int

// Scopes, from least to most.
const (
	ScopeNone  Scope = iota // no valid token
	ScopeRead               // GET (and HEAD) endpoints, /metrics included
	ScopeAdmin              // every endpoint
)

// tokens holds the digests of the configured bearer tokens.
type tokens struct {
	admin, read [sha256.Size]byte
	hasAdmin    bool
	hasRead     bool
}

// SetTokens sets the admin- and read-scope bearer tokens. With both empty
// the API is open (the node allows that only on loopback). Otherwise every
// endpoint except /healthz and /readyz needs a token: 401 without a valid
// one, 403 when a read token asks for a change. Safe while serving.
func (s *Server) SetTokens(admin, read string) {
	if admin == "" && read == "" {
		s.tokens.Store(nil)
		return
	}
	t := &tokens{hasAdmin: admin != "", hasRead: read != ""}
	t.admin, t.read = sha256.Sum256([]byte(admin)), sha256.Sum256([]byte(read))
	s.tokens.Store(t)
}

// scope compares digests in constant time, so timing reveals nothing of
// the tokens.
func (t *tokens) scope(presented string) Scope {
	d := sha256.Sum256([]byte(presented))
	if t.hasAdmin && subtle.ConstantTimeCompare(d[:], t.admin[:]) == 1 {
		return ScopeAdmin
	}
	if t.hasRead && subtle.ConstantTimeCompare(d[:], t.read[:]) == 1 {
		return ScopeRead
	}
	return ScopeNone
}

// authorize answers 401/403 and reports false when r may not proceed.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	t := s.tokens.Load()
	if t == nil {
		return true
	}
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		return true // probes carry no credentials and reveal nothing
	}
	presented, ok := bearer(r)
	scope := ScopeNone
	if ok {
		scope = t.scope(presented)
	}
	if scope == ScopeNone {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sextant"`)
		WriteError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required (Authorization: Bearer TOKEN)")
		return false
	}
	if scope < ScopeAdmin && r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteError(w, http.StatusForbidden, "forbidden", "this token is read-only")
		return false
	}
	return true
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(h[len(p):]), true
}
