package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// validatingCluster answers PUT /v1/policies the way a node does before
// proposing: with the rules' validation error, if any.
type validatingCluster struct{}

func (validatingCluster) Nodes() []NodeInfo                          { return nil }
func (validatingCluster) Cluster(context.Context) ClusterInfo        { return ClusterInfo{} }
func (validatingCluster) Policies() PolicySet                        { return PolicySet{} }
func (validatingCluster) WaitPolicies(context.Context, uint64) error { return nil }
func (validatingCluster) PutPolicies(_ context.Context, rules []fsm.Rule, expect *uint64) (PolicySet, error) {
	if err := fsm.PutPolicies(rules).Validate(); err != nil {
		return PolicySet{}, err
	}
	return PolicySet{Version: 1, Rules: rules}, nil
}

// FuzzPutPolicies sends arbitrary bodies to PUT /v1/policies: every answer
// is 200 or a 4xx with a JSON error body, never a panic or a 5xx.
func FuzzPutPolicies(f *testing.F) {
	f.Add([]byte(`{"rules":[{"match":"swarm/+/#","mode":"sequenced","replicas":3,"latency_ms":40}]}`))
	f.Add([]byte(`{"rules":[{"match":"a/#/b","mode":"direct"}],"expect_version":3}`))
	f.Add([]byte(`{"rules":[{"match":"x","mode":"bogus","retention":{"messages":-1}}]}`))
	f.Add([]byte(`not json`))
	s := New(&fakeNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithCluster(validatingCluster{})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/policies", bytes.NewReader(body)))
		switch {
		case rec.Code == 200:
		case rec.Code >= 400 && rec.Code < 500:
			var eb struct{ Error, Code string }
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Code == "" {
				t.Fatalf("status %d without a JSON error body: %q", rec.Code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.Bytes())
		}
	})
}
