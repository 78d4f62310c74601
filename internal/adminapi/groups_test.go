package adminapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

// fakeGroups pages a sorted list as the node does.
type fakeGroups []adminapi.GroupInfo

func (fakeGroups) MetaBehind() string { return "" }

func (g fakeGroups) Groups(_ context.Context, after string, limit int) ([]adminapi.GroupInfo, bool) {
	i := 0
	for i < len(g) && g[i].ID <= after {
		i++
	}
	rest := g[i:]
	if len(rest) > limit {
		return rest[:limit], true
	}
	return rest, false
}

func groupsServer(gs fakeGroups) *adminapi.Server {
	return adminapi.New(statusNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithGroups(gs)
}

// TestGroupsEndpoint: GET /v1/groups lists what the node gives, [] for
// none, and the client reads it.
func TestGroupsEndpoint(t *testing.T) {
	for _, gs := range []fakeGroups{nil, {
		{ID: "seq/a", Home: "n1", Replicas: []string{"n1", "n2", "n3"}, Epoch: 2,
			Stats: &adminapi.GroupStats{Node: "n1", Role: "leader", Leader: "n1", Records: 7, Bytes: 700, Topics: 1}},
		{ID: "seq/b", Home: "n3", Replicas: []string{"n3"}, Epoch: 1, StatsError: "home n3 did not answer"},
	}} {
		s := groupsServer(gs)
		var got adminapi.GroupsPage
		if code, eb := call(t, s, "GET", "/v1/groups", &got); code != 200 || got.Groups == nil || len(got.Groups) != len(gs) || got.Next != "" {
			t.Fatalf("status %d %+v: %+v", code, eb, got)
		}
		srv := httptest.NewServer(s)
		all, err := client.New(srv.URL, "").Groups(context.Background())
		srv.Close()
		if err != nil || len(all) != len(gs) {
			t.Fatalf("client: %+v %v", all, err)
		}
		if len(gs) > 0 && (all[0].Stats == nil || all[0].Stats.Records != 7 || all[1].StatsError == "") {
			t.Fatalf("client: %+v", all)
		}
	}
}

// behindGroups is a node whose metadata copy has not caught up.
type behindGroups struct{ fakeGroups }

func (behindGroups) MetaBehind() string { return "not caught up" }

// TestGroupsSayTheCopyIsBehind: a node whose metadata copy has not caught
// up says so in the page (meta_behind); one that has leaves it out.
func TestGroupsSayTheCopyIsBehind(t *testing.T) {
	gs := fakeGroups{{ID: "seq/a", Home: "n1", Replicas: []string{"n1"}, Epoch: 1}}
	s := adminapi.New(statusNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithGroups(behindGroups{gs})
	var got adminapi.GroupsPage
	if code, eb := call(t, s, "GET", "/v1/groups", &got); code != 200 || got.MetaBehind != "not caught up" || len(got.Groups) != 1 {
		t.Fatalf("status %d %+v: %+v", code, eb, got)
	}
	rec := httptest.NewRecorder()
	groupsServer(gs).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/groups", nil))
	if strings.Contains(rec.Body.String(), "meta_behind") {
		t.Fatalf("a caught-up node's page says meta_behind: %s", rec.Body.String())
	}
}

func manyGroups(n int) fakeGroups {
	gs := make(fakeGroups, n)
	for i := range gs {
		gs[i] = adminapi.GroupInfo{ID: fmt.Sprintf("g/%04d", i), Home: "n1", Replicas: []string{"n1"}, Epoch: 1}
	}
	return gs
}

func ids(gs []adminapi.GroupInfo) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.ID
	}
	return out
}

// TestGroupsPaging: pages of the default size and of limit=, each's next
// the after= of the following one, the last with no next; every group
// once, in id order; and the client follows the pages.
func TestGroupsPaging(t *testing.T) {
	const n = 2*adminapi.DefaultGroupsLimit + 37
	gs := manyGroups(n)
	s := groupsServer(gs)
	for _, limit := range []int{0, 1, 7, adminapi.DefaultGroupsLimit, adminapi.MaxGroupsLimit} {
		var seen []string
		pages, after := 0, ""
		for {
			v := url.Values{}
			if after != "" {
				v.Set("after", after)
			}
			if limit > 0 {
				v.Set("limit", fmt.Sprint(limit))
			}
			var page adminapi.GroupsPage
			if code, eb := call(t, s, "GET", "/v1/groups?"+v.Encode(), &page); code != 200 {
				t.Fatalf("limit %d after %q: status %d %+v", limit, after, code, eb)
			}
			pages++
			want := limit
			if want == 0 {
				want = adminapi.DefaultGroupsLimit
			}
			if rest := n - len(seen); len(page.Groups) != min(want, rest) {
				t.Fatalf("limit %d, page %d: %d groups, want %d", limit, pages, len(page.Groups), min(want, rest))
			}
			seen = append(seen, ids(page.Groups)...)
			if page.Next == "" {
				break
			}
			if page.Next != page.Groups[len(page.Groups)-1].ID {
				t.Fatalf("limit %d: next %q is not the page's last id", limit, page.Next)
			}
			after = page.Next
		}
		if !slices.Equal(seen, ids(gs)) {
			t.Fatalf("limit %d: %d groups over %d pages, not each once in order", limit, len(seen), pages)
		}
	}

	// Groups created between two pages sort where they belong: one
	// before the cursor is not given, one after it is; none is repeated.
	var page adminapi.GroupsPage
	call(t, s, "GET", "/v1/groups?limit=2", &page)
	if got := ids(page.Groups); !slices.Equal(got, []string{"g/0000", "g/0001"}) || page.Next != "g/0001" {
		t.Fatalf("first page: %v next %q", got, page.Next)
	}
	grown := slices.Concat(fakeGroups{{ID: "a/new"}}, gs[:2], fakeGroups{{ID: "g/0001x"}}, gs[2:])
	call(t, groupsServer(grown), "GET", "/v1/groups?limit=2&after="+url.QueryEscape(page.Next), &page)
	if got := ids(page.Groups); !slices.Equal(got, []string{"g/0001x", "g/0002"}) || page.Next != "g/0002" {
		t.Fatalf("second page after two creations: %v next %q", got, page.Next)
	}
	call(t, s, "GET", "/v1/groups?after=zzz", &page)
	if page.Groups == nil || len(page.Groups) != 0 || page.Next != "" {
		t.Fatalf("after the last: %+v", page)
	}

	srv := httptest.NewServer(s)
	defer srv.Close()
	all, err := client.New(srv.URL, "").Groups(context.Background())
	if err != nil || !slices.Equal(ids(all), ids(gs)) {
		t.Fatalf("client: %d groups, %v", len(all), err)
	}
}

// TestGroupsBadQuery: every bad parameter is a 400 with a JSON error.
func TestGroupsBadQuery(t *testing.T) {
	s := groupsServer(manyGroups(3))
	for q, code := range map[string]string{
		"limit=0":  "bad_limit",
		"limit=-1": "bad_limit",
		fmt.Sprintf("limit=%d", adminapi.MaxGroupsLimit+1): "bad_limit",
		"limit=ten":                         "bad_limit",
		"limit=":                            "bad_limit",
		"limit=1&limit=2":                   "bad_query",
		"page=2":                            "bad_query",
		"after=a%00b":                       "bad_after",
		"after=" + strings.Repeat("x", 256): "bad_after",
	} {
		st, eb := call(t, s, "GET", "/v1/groups?"+q, nil)
		if st != 400 || eb.Code != code {
			t.Errorf("%s: status %d %+v, want 400 %s", q, st, eb, code)
		}
	}
}

// FuzzGroupsQuery sends arbitrary queries to GET /v1/groups: every answer
// is a 200 page within its limit, in id order, past after, or a 400 with
// a JSON error body.
func FuzzGroupsQuery(f *testing.F) {
	f.Add("after=g%2F0003&limit=2")
	f.Add("limit=1000")
	f.Add("after=&limit=")
	f.Add("after=%ff%fe")
	s := groupsServer(manyGroups(20))
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "/v1/groups", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			var page adminapi.GroupsPage
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || page.Groups == nil {
				t.Fatalf("200 for %q: %q", query, rec.Body.String())
			}
			q, _ := url.ParseQuery(query)
			after := q.Get("after")
			for i, g := range page.Groups {
				if g.ID <= after || i > 0 && page.Groups[i-1].ID >= g.ID {
					t.Fatalf("%q: %v not in order after %q", query, ids(page.Groups), after)
				}
			}
			if len(page.Groups) > adminapi.MaxGroupsLimit || page.Next != "" && page.Next != page.Groups[len(page.Groups)-1].ID {
				t.Fatalf("%q: %d groups, next %q", query, len(page.Groups), page.Next)
			}
		case 400:
			var eb adminapi.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Code == "" {
				t.Fatalf("400 without a JSON error body: %q", rec.Body.String())
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, query, rec.Body.String())
		}
	})
}
