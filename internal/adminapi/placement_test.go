package adminapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type fakePlacement struct{ info PlacementInfo }

func (f fakePlacement) Placement(ctx context.Context) PlacementInfo {
	if _, ok := ctx.Deadline(); !ok {
		return PlacementInfo{LeaderErr: "no deadline"}
	}
	return f.info
}

// GET /v1/placement answers the node's view as JSON with a read token;
// other methods are refused.
func TestPlacementEndpoint(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := PlacementInfo{Leader: "n1", Round: 7, At: at, Groups: []PlacementGroup{{
		Group: "swarm/7", Topics: []string{"swarm/7/pos"}, Rule: "swarm/+/#", Home: "n2", Voters: []string{"n2"}, Epoch: 3,
		Monitored: true, EtMs: 31.5, LthMs: 25, Violated: true, Producers: 2, Consumers: 1,
		LastMove: &PlacementMove{Reason: "migration", At: at},
		Pending:  &PlacementDecision{Home: "n3", Voters: []string{"n3"}, Reason: "violation", At: at},
	}}, Nodes: []PlacementNode{{ID: "n2", CPU: 0.5}}, Rounds: 7, Violations: 1, Decisions: 1}
	s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithPlacement(fakePlacement{want})
	read := strings.Repeat("r", 20)
	s.SetTokens(strings.Repeat("a", 20), read)

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/placement", nil)
	req.Header.Set("Authorization", "Bearer "+read)
	s.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("GET /v1/placement: %d %s", rec.Code, rec.Body)
	}
	for _, field := range []string{`"e_t_ms": 31.5`, `"lth_ms": 25`, `"violated": true`, `"last_move": {`, `"pending": {`} {
		if !strings.Contains(rec.Body.String(), field) {
			t.Errorf("body lacks %s: %s", field, rec.Body)
		}
	}
	var got PlacementInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Groups[0].Pending.Home != "n3" || !got.At.Equal(at) {
		t.Fatalf("decoded %+v, %v", got, err)
	}

	rec = httptest.NewRecorder()
	req = httptest.NewRequest("POST", "/v1/placement", nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", 20))
	s.ServeHTTP(rec, req)
	if rec.Code != 405 {
		t.Fatalf("POST /v1/placement: %d, want 405", rec.Code)
	}
}
