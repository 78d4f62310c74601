package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeDrainer records the requests it gets; the second one finds it
// draining already.
type fakeDrainer struct {
	mu   sync.Mutex
	reqs []DrainRequest
	fail error
}

func (f *fakeDrainer) Drain(_ context.Context, req DrainRequest) (DrainReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return DrainReport{}, f.fail
	}
	f.reqs = append(f.reqs, req)
	if len(f.reqs) > 1 {
		return DrainReport{}, fmt.Errorf("node n1: %w", ErrDraining)
	}
	return DrainReport{NodeID: "n1", Reason: "use another server", Persistent: 2, Moved: 2}, nil
}

func post(t *testing.T, s *Server, token, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/drain", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	s.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestDrainEndpoint(t *testing.T) {
	d := &fakeDrainer{}
	s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithDrain(d)
	admin, read := strings.Repeat("a", 20), strings.Repeat("r", 20)
	s.SetTokens(admin, read)

	if code, _ := post(t, s, "", ""); code != 401 {
		t.Fatalf("drain without a token: %d", code)
	}
	if code, _ := post(t, s, read, ""); code != 403 {
		t.Fatalf("drain with a read-only token: %d", code)
	}
	for _, bad := range []string{`{"leave":"yes"}`, `{"timeout":"soon"}`, `{"timeout":"-1s"}`, `{"unknown":1}`, `not json`} {
		if code, body := post(t, s, admin, bad); code != 400 || !strings.Contains(body, `"bad_request"`) {
			t.Errorf("body %s: %d %s", bad, code, body)
		}
	}
	if len(d.reqs) != 0 {
		t.Fatalf("refused requests reached the drainer: %+v", d.reqs)
	}
	code, body := post(t, s, admin, `{"leave":true,"timeout":"20s"}`)
	var rep DrainReport
	if code != 200 || json.Unmarshal([]byte(body), &rep) != nil || rep.Moved != 2 || rep.NodeID != "n1" {
		t.Fatalf("drain: %d %s", code, body)
	}
	if d.reqs[0] != (DrainRequest{Leave: true, Timeout: "20s"}) {
		t.Fatalf("request reached the drainer as %+v", d.reqs[0])
	}
	if code, body := post(t, s, admin, ""); code != 409 || !strings.Contains(body, `"draining"`) {
		t.Fatalf("second drain: %d %s", code, body)
	}
	d.fail = fmt.Errorf("x: %w", ErrCannotLeave)
	if code, body := post(t, s, admin, `{"leave":true}`); code != 409 || !strings.Contains(body, `"cannot_leave"`) {
		t.Fatalf("leave refused: %d %s", code, body)
	}
}

// FuzzDrain sends arbitrary bodies to POST /v1/drain: every answer is 200,
// 409 or a 400 with a JSON error body, never a panic.
func FuzzDrain(f *testing.F) {
	f.Add([]byte(`{"leave":true,"timeout":"30s"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"timeout":"1e9h"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithDrain(&fakeDrainer{})
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/drain", bytes.NewReader(body)))
		switch rec.Code {
		case 200, 409:
		case 400:
			var eb ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Code == "" {
				t.Fatalf("400 without a JSON error body: %q", rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.Bytes())
		}
	})
}

type fakeRemover struct{ removed []string }

func (f *fakeRemover) RemoveNode(_ context.Context, id string, force bool) error {
	if id == "alive" && !force {
		return fmt.Errorf("node %s: %w", id, ErrNodeAlive)
	}
	f.removed = append(f.removed, id)
	return nil
}

func TestRemoveEndpoint(t *testing.T) {
	rm := &fakeRemover{}
	s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithRemove(rm)
	admin, read := strings.Repeat("a", 20), strings.Repeat("r", 20)
	s.SetTokens(admin, read)
	del := func(token, path string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("DELETE", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		s.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, _ := del(read, "/v1/nodes/gone"); code != 403 {
		t.Fatalf("read token removed a node: %d", code)
	}
	if code, body := del(admin, "/v1/nodes/alive"); code != 409 || !strings.Contains(body, "cannot_remove") {
		t.Fatalf("alive node: %d %s", code, body)
	}
	if code, _ := del(admin, "/v1/nodes/alive?force=true"); code != 200 {
		t.Fatalf("forced: %d", code)
	}
	if code, _ := del(admin, "/v1/nodes/gone"); code != 200 || len(rm.removed) != 2 || rm.removed[1] != "gone" {
		t.Fatalf("gone: %d %v", code, rm.removed)
	}
}
