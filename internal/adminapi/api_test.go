package adminapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeNode struct{ ready error }

func (f *fakeNode) Status() Status { return Status{NodeID: "n1", Version: "test"} }
func (f *fakeNode) Ready() error   { return f.ready }

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_test_total", Help: "t"})
	reg.MustRegister(c)
	node := &fakeNode{}
	s := New(node, reg, slog.New(slog.DiscardHandler))

	res, body := get(t, s, "/metrics")
	if res.StatusCode != 200 || !strings.Contains(body, "sextant_test_total") {
		t.Fatalf("/metrics: %d %q", res.StatusCode, body)
	}
	if res, _ := get(t, s, "/healthz"); res.StatusCode != 200 {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
	res, body = get(t, s, "/v1/status")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || res.StatusCode != 200 || st.NodeID != "n1" {
		t.Fatalf("/v1/status: %d %q %v", res.StatusCode, body, err)
	}
	if res, _ := get(t, s, "/readyz"); res.StatusCode != 200 {
		t.Fatalf("/readyz when ready: %d", res.StatusCode)
	}
	node.ready = errors.New("store not open")
	res, body = get(t, s, "/readyz")
	if res.StatusCode != 503 || !strings.Contains(body, "store not open") {
		t.Fatalf("/readyz when not ready: %d %q", res.StatusCode, body)
	}
	res, body = get(t, s, "/v1/nope")
	var eb ErrorBody
	if res.StatusCode != 404 || json.Unmarshal([]byte(body), &eb) != nil || eb.Code != "not_found" {
		t.Fatalf("unknown path: %d %q", res.StatusCode, body)
	}
	if res.Header.Get("Content-Type") != "application/json" {
		t.Fatal("error body is not JSON")
	}
}
