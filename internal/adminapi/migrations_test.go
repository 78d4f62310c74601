package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeMigrator struct {
	got     []MoveRequest
	timeout time.Duration
	err     error
	asked   []string // the node of each GET
}

func (f *fakeMigrator) Migrations(_ context.Context, node string) (MigrationList, error) {
	f.asked = append(f.asked, node)
	switch node {
	case "":
		return MigrationList{
			Migrations: []MigrationInfo{{Node: "n1", Group: "g", From: "n1", To: "n2", Reason: "manual", Kind: "handover", State: "done", PauseSeconds: 0.004}},
			Nodes:      []string{"n1", "n2"},
			Unanswered: []NodeError{{Node: "n3", Error: "peer: no link"}},
		}, nil
	case "n9":
		return MigrationList{}, fmt.Errorf("x: %w", ErrUnknownNode)
	}
	return MigrationList{Nodes: []string{node}}, nil
}

func (f *fakeMigrator) Move(_ context.Context, req MoveRequest, timeout time.Duration) (MoveResult, error) {
	f.got, f.timeout = append(f.got, req), timeout
	if f.err != nil {
		return MoveResult{}, f.err
	}
	return MoveResult{Group: "g", From: "n1", Home: req.To, Voters: []string{req.To}, Epoch: 2}, nil
}

func TestMigrationsEndpoint(t *testing.T) {
	f := &fakeMigrator{}
	s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithMigrations(f)
	do := func(method, body string) (int, string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(method, "/v1/migrations", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	code, body := do("GET", "")
	var list MigrationList
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Migrations) != 1 || list.Migrations[0].Kind != "handover" ||
		list.Migrations[0].Node != "n1" || len(list.Nodes) != 2 || len(list.Unanswered) != 1 || list.Unanswered[0].Node != "n3" {
		t.Fatalf("GET: %d %s", code, body)
	}
	if !strings.Contains(body, `"unanswered": [`) || !strings.Contains(body, `"node": "n3"`) {
		t.Fatalf("GET: the JSON does not say which node did not answer: %s", body)
	}
	for q, want := range map[string]struct {
		code int
		body string
	}{
		"?node=n2": {200, `"migrations": []`},
		"?node=n9": {404, "not_found"},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/migrations"+q, nil))
		if rec.Code != want.code || !strings.Contains(rec.Body.String(), want.body) {
			t.Errorf("GET %s: %d %s, want %d with %q", q, rec.Code, rec.Body.String(), want.code, want.body)
		}
	}
	if !slices.Equal(f.asked, []string{"", "n2", "n9"}) && !slices.Equal(f.asked, []string{"", "n9", "n2"}) {
		t.Errorf("nodes asked: %q", f.asked)
	}
	for _, c := range []struct {
		body string
		err  error
		code int
		want string
	}{
		{`{"topic":"swarm/1/t","to":"n2"}`, nil, 200, `"home": "n2"`},
		{`{"topic":"swarm/1/t","to":"n2","timeout":"5s"}`, nil, 200, `"epoch": 2`},
		{`{"topic":"swarm/1/t"}`, nil, 400, "topic and to are required"},
		{`{"topic":"t","to":"n2","timeout":"soon"}`, nil, 400, "timeout"},
		{`{"topic":"t","to":"n2","why":"x"}`, nil, 400, "unknown field"},
		{`not json`, nil, 400, "bad_request"},
		{`{"topic":"t","to":"n9"}`, fmt.Errorf("x: %w", ErrMoveUnknown), 404, "not_found"},
		{`{"topic":"t","to":"n2"}`, fmt.Errorf("x: %w", ErrMoveConflict), 409, "conflict"},
		{`{"topic":"t","to":"n2"}`, fmt.Errorf("x: %w", ErrMoveTimeout), 504, "timeout"},
		{`{"topic":"t","to":"n2"}`, fmt.Errorf("x: %w", ErrMoveUnavailable), 503, "no_leader"},
	} {
		f.err = c.err
		code, body := do("POST", c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("POST %s: %d %s, want %d with %q", c.body, code, body, c.code, c.want)
		}
	}
	if f.timeout != 60*time.Second || len(f.got) < 2 {
		t.Errorf("moves %+v, last timeout %v", f.got, f.timeout)
	}
}

// TestSortMigrations: running migrations first, oldest start first, then
// the finished ones, the last to end first, whichever node ran them.
func TestSortMigrations(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	list := []MigrationInfo{
		{Node: "n1", Group: "a", State: "done", Started: at(0), TotalSeconds: 10}, // ended at 10
		{Node: "n2", Group: "b", State: "running", Started: at(5)},
		{Node: "n3", Group: "c", State: "failed", Started: at(8), TotalSeconds: 1}, // ended at 9
		{Node: "n2", Group: "d", State: "running", Started: at(2)},
		{Node: "n3", Group: "e", State: "done", Started: at(1), TotalSeconds: 11}, // ended at 12
	}
	SortMigrations(list)
	var got []string
	for _, m := range list {
		got = append(got, m.Group)
	}
	if want := []string{"d", "b", "e", "a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
}
