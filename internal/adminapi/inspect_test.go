package adminapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func do(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

type noClients struct{}

func (noClients) Clients() []ClientInfo { return nil }

// fakeInspector holds one session, "c1", and records kicks.
type fakeInspector struct {
	kicked  []string
	filters []string
}

func (f *fakeInspector) Client(id string) (ClientDetail, bool) {
	return ClientDetail{ID: id, Protocol: "5"}, id == "c1"
}
func (f *fakeInspector) Sessions() []SessionInfo { return nil }
func (f *fakeInspector) Subscriptions(string) []SubscriptionInfo {
	return nil
}
func (f *fakeInspector) Retained(filter string, limit int) []RetainedInfo {
	f.filters = append(f.filters, filter)
	return nil
}
func (f *fakeInspector) Topics(filter string, limit int) []TopicInfo {
	f.filters = append(f.filters, filter)
	return nil
}
func (f *fakeInspector) Kick(id string, discard bool) bool {
	if id != "c1" {
		return false
	}
	f.kicked = append(f.kicked, id+map[bool]string{true: "+discard", false: ""}[discard])
	return true
}

func inspectServer() (*Server, *fakeInspector) {
	in := &fakeInspector{}
	s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithClients(noClients{}).WithInspector(in).WithKick(in)
	return s, in
}

// TestEmptyListsAreArrays: every listing answers [] when it has nothing,
// never null.
func TestEmptyListsAreArrays(t *testing.T) {
	s, _ := inspectServer()
	for _, path := range []string{"/v1/clients", "/v1/sessions", "/v1/subscriptions", "/v1/retained", "/v1/topics"} {
		res, body := do(t, s, "GET", path)
		if res.StatusCode != 200 || strings.TrimSpace(body) != "[]" {
			t.Errorf("GET %s: %d %q; want 200 []", path, res.StatusCode, body)
		}
	}
	res, body := do(t, s, "GET", "/v1/clients/c1")
	var d ClientDetail
	if res.StatusCode != 200 || json.Unmarshal([]byte(body), &d) != nil || d.Subscriptions == nil {
		t.Errorf("GET /v1/clients/c1: %d %q; want subscriptions []", res.StatusCode, body)
	}
}

// TestWrongMethodIs405WithAllow: a path that exists for other methods
// answers 405 with an Allow header and a JSON body; an unknown path 404.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	s, _ := inspectServer()
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/v1/status", "GET, HEAD"},
		{"DELETE", "/v1/topics", "GET, HEAD"},
		{"PUT", "/v1/clients/c1", "GET, HEAD, DELETE"},
		{"POST", "/v1/sessions/c1", "DELETE"},
	} {
		res, body := do(t, s, c.method, c.path)
		var eb ErrorBody
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != c.allow ||
			json.Unmarshal([]byte(body), &eb) != nil || eb.Code != "method_not_allowed" {
			t.Errorf("%s %s: %d Allow %q %q; want 405 Allow %q", c.method, c.path, res.StatusCode, res.Header.Get("Allow"), body, c.allow)
		}
	}
	if res, _ := do(t, s, "GET", "/v1/nothing"); res.StatusCode != 404 {
		t.Errorf("unknown path: %d", res.StatusCode)
	}
}

func TestClientDetailAndKick(t *testing.T) {
	s, in := inspectServer()
	if res, body := do(t, s, "GET", "/v1/clients/nobody"); res.StatusCode != 404 || !strings.Contains(body, "no_such_client") {
		t.Fatalf("unknown client: %d %q", res.StatusCode, body)
	}
	if res, _ := do(t, s, "DELETE", "/v1/clients/c1"); res.StatusCode != 200 {
		t.Fatalf("kick: %d", res.StatusCode)
	}
	if res, _ := do(t, s, "DELETE", "/v1/clients/c1?discard_session=true"); res.StatusCode != 200 {
		t.Fatalf("kick and discard: %d", res.StatusCode)
	}
	if res, _ := do(t, s, "DELETE", "/v1/sessions/c1"); res.StatusCode != 200 {
		t.Fatalf("discard session: %d", res.StatusCode)
	}
	if res, _ := do(t, s, "DELETE", "/v1/clients/c1?discard_session=maybe"); res.StatusCode != 400 {
		t.Fatalf("bad discard_session: %d", res.StatusCode)
	}
	if res, _ := do(t, s, "DELETE", "/v1/sessions/nobody"); res.StatusCode != 404 {
		t.Fatalf("discarding an unknown session: %d", res.StatusCode)
	}
	if got := strings.Join(in.kicked, " "); got != "c1 c1+discard c1+discard" {
		t.Fatalf("kicks %q", got)
	}
}

func TestListParams(t *testing.T) {
	s, in := inspectServer()
	for _, c := range []struct {
		path string
		code int
	}{
		{"/v1/topics?filter=a/%2B/c&limit=5", 200},
		{"/v1/retained", 200},
		{"/v1/topics?filter=a/#/c", 400},
		{"/v1/retained?filter=$share/g/a", 400},
		{"/v1/topics?limit=0", 400},
		{"/v1/topics?limit=many", 400},
	} {
		if res, body := do(t, s, "GET", c.path); res.StatusCode != c.code {
			t.Errorf("GET %s: %d %q; want %d", c.path, res.StatusCode, body, c.code)
		}
	}
	if got := strings.Join(in.filters, " "); got != "a/+/c #" {
		t.Fatalf("filters asked %q", got)
	}
}
