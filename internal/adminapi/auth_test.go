package adminapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestBearerTokens: with tokens set, /healthz and /readyz stay open, every
// other endpoint (/metrics included) needs a token: 401 with a JSON body
// without one or with a wrong one, 403 for a read token on a write; the
// admin token may do everything. Clearing the tokens opens the API again.
func TestBearerTokens(t *testing.T) {
	const admin, read = "admin-token-0123456789", "read-token-0123456789"
	s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	s.Handle("PUT /v1/thing", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"ok": "yes"}) }))
	s.SetTokens(admin, read)
	do := func(method, path, token string) (int, ErrorBody, http.Header) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var eb ErrorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &eb)
		return rec.Code, eb, rec.Header()
	}
	for _, c := range []struct {
		method, path, token string
		want                int
		code                string
	}{
		{"GET", "/healthz", "", 200, ""},
		{"GET", "/readyz", "", 200, ""},
		{"GET", "/v1/status", "", 401, "unauthorized"},
		{"GET", "/metrics", "", 401, "unauthorized"},
		{"GET", "/v1/status", "wrong-token-0123456789", 401, "unauthorized"},
		{"GET", "/v1/nope", "", 401, "unauthorized"}, // no endpoint discovery without a token
		{"GET", "/v1/status", read, 200, ""},
		{"GET", "/metrics", read, 200, ""},
		{"PUT", "/v1/thing", read, 403, "forbidden"},
		{"PUT", "/v1/thing", "", 401, "unauthorized"},
		{"PUT", "/v1/thing", admin, 200, ""},
		{"GET", "/v1/status", admin, 200, ""},
		{"GET", "/v1/nope", admin, 404, "not_found"},
	} {
		got, eb, hdr := do(c.method, c.path, c.token)
		if got != c.want || eb.Code != c.code {
			t.Errorf("%s %s token %q: %d %q, want %d %q", c.method, c.path, c.token, got, eb.Code, c.want, c.code)
		}
		if got == 401 && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("401 without WWW-Authenticate: Bearer")
		}
	}
	req := httptest.NewRequest("GET", "/v1/status", nil)
	req.Header.Set("Authorization", "Basic "+admin)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("a non-bearer Authorization header was accepted: %d", rec.Code)
	}
	s.SetTokens("", "")
	if got, _, _ := do("PUT", "/v1/thing", ""); got != 200 {
		t.Fatalf("without tokens the API is open, got %d", got)
	}
	s.SetTokens("", read) // read token only: nothing can write
	if got, _, _ := do("PUT", "/v1/thing", read); got != 403 {
		t.Fatalf("read-only configuration allowed a write: %d", got)
	}
}
