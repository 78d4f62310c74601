package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeMigrator struct {
	got     []MoveRequest
	timeout time.Duration
	err     error
}

func (f *fakeMigrator) Migrations() []MigrationInfo {
	return []MigrationInfo{{Group: "g", From: "n1", To: "n2", Reason: "manual", Kind: "handover", State: "done", PauseSeconds: 0.004}}
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
	var list []MigrationInfo
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0].Kind != "handover" {
		t.Fatalf("GET: %d %s", code, body)
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
