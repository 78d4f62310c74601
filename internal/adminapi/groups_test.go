package adminapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

type fakeGroups []adminapi.GroupInfo

func (g fakeGroups) Groups(context.Context) []adminapi.GroupInfo { return g }

// TestGroupsEndpoint: GET /v1/groups lists what the node gives, [] for
// none, and the client reads it.
func TestGroupsEndpoint(t *testing.T) {
	for _, gs := range []fakeGroups{nil, {
		{ID: "seq/a", Home: "n1", Replicas: []string{"n1", "n2", "n3"}, Epoch: 2,
			Stats: &adminapi.GroupStats{Node: "n1", Role: "leader", Leader: "n1", Records: 7, Bytes: 700, Topics: 1}},
		{ID: "seq/b", Home: "n3", Replicas: []string{"n3"}, Epoch: 1, StatsError: "home n3 did not answer"},
	}} {
		s := adminapi.New(statusNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithGroups(gs)
		var got []adminapi.GroupInfo
		if code, eb := call(t, s, "GET", "/v1/groups", &got); code != 200 || got == nil || len(got) != len(gs) {
			t.Fatalf("status %d %+v: %+v", code, eb, got)
		}
		srv := httptest.NewServer(s)
		got, err := client.New(srv.URL, "").Groups(context.Background())
		srv.Close()
		if err != nil || len(got) != len(gs) {
			t.Fatalf("client: %+v %v", got, err)
		}
		if len(gs) > 0 && (got[0].Stats == nil || got[0].Stats.Records != 7 || got[1].StatsError == "") {
			t.Fatalf("client: %+v", got)
		}
	}
}
