package adminapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

type statusNode struct{}

func (statusNode) Status() adminapi.Status { return adminapi.Status{NodeID: "n1"} }
func (statusNode) Ready() error            { return nil }

// fakeLog is one topic's log in fakeHistory: records from index first.
type fakeLog struct {
	first    uint64
	payloads [][]byte
}

// fakeHistory answers like a node's history reader: "direct/..." topics
// are not sequenced, "down/..." have no replica answering, the topics of
// logs are known, the rest unknown.
type fakeHistory struct {
	logs  map[string]*fakeLog
	reads []adminapi.Where
}

func (h *fakeHistory) info(topic string) (adminapi.TopicLog, *fakeLog, error) {
	switch {
	case strings.HasPrefix(topic, "direct/"):
		return adminapi.TopicLog{}, nil, fmt.Errorf("%w: %s", adminapi.ErrNotSequenced, topic)
	case strings.HasPrefix(topic, "down/"):
		return adminapi.TopicLog{}, nil, fmt.Errorf("%w: %s", adminapi.ErrUnavailable, topic)
	}
	l, ok := h.logs[topic]
	if !ok {
		return adminapi.TopicLog{}, nil, fmt.Errorf("%w: %s", adminapi.ErrUnknownTopic, topic)
	}
	latest := l.first + uint64(len(l.payloads)) - 1
	return adminapi.TopicLog{Topic: topic, Group: topic, First: l.first, Latest: latest, Count: uint64(len(l.payloads)),
		Home: "n2", Replicas: []string{"n2", "n1", "n3"}, Epoch: 2, ServedBy: "n2"}, l, nil
}

func (h *fakeHistory) TopicLog(_ context.Context, topic string, w adminapi.Where) (adminapi.TopicLog, error) {
	h.reads = append(h.reads, w)
	info, _, err := h.info(topic)
	return info, err
}

func (h *fakeHistory) LogRecords(_ context.Context, topic string, from uint64, limit int, w adminapi.Where) ([]adminapi.LogRecord, adminapi.TopicLog, error) {
	h.reads = append(h.reads, w)
	info, l, err := h.info(topic)
	if err != nil {
		return nil, info, err
	}
	if from == 0 {
		from = l.first
	}
	if from < l.first {
		return nil, info, &adminapi.CompactedError{Topic: topic, First: l.first}
	}
	var out []adminapi.LogRecord
	for i := from; i <= info.Latest && len(out) < limit; i++ {
		r := adminapi.LogRecord{Index: i, Seq: i, QoS: 1, Time: time.Unix(1700000000, 0).UTC(),
			UserProperties: []adminapi.UserProperty{{Key: "k", Value: "v"}}}
		r.SetPayload(l.payloads[i-l.first])
		out = append(out, r)
	}
	return out, info, nil
}

func newHistoryServer(t testing.TB) (*adminapi.Server, *fakeHistory) {
	t.Helper()
	h := &fakeHistory{logs: map[string]*fakeLog{
		"sensors/t1": {first: 1, payloads: [][]byte{[]byte("a"), []byte("b"), []byte("c"), {0xff, 0x00}}},
		"old":        {first: 5, payloads: [][]byte{[]byte("e"), []byte("f")}},
		"a//b":       {first: 1, payloads: [][]byte{[]byte("x")}},
		"/lead":      {first: 1, payloads: [][]byte{[]byte("y")}},
		"trail/":     {first: 1, payloads: [][]byte{[]byte("z")}},
		"x/messages": {first: 1, payloads: [][]byte{[]byte("m")}},
		"emptied":    {first: 8}, // retention removed records 1 to 7
	}}
	s := adminapi.New(statusNode{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithHistory(h)
	return s, h
}

func call(t *testing.T, s http.Handler, method, target string, out any) (int, adminapi.ErrorBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	var eb adminapi.ErrorBody
	if rec.Code >= 300 {
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Code == "" {
			t.Fatalf("%s %s: status %d without a JSON error body: %q", method, target, rec.Code, rec.Body.String())
		}
		return rec.Code, eb
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v: %q", method, target, err, rec.Body.String())
		}
	}
	return rec.Code, eb
}

func TestHistoryTopic(t *testing.T) {
	s, h := newHistoryServer(t)
	var tl adminapi.TopicLog
	if code, eb := call(t, s, "GET", "/v1/topics/sensors%2Ft1", &tl); code != 200 {
		t.Fatalf("status %d: %+v", code, eb)
	}
	if tl.Topic != "sensors/t1" || tl.First != 1 || tl.Latest != 4 || tl.Home != "n2" || tl.Epoch != 2 || len(tl.Replicas) != 3 {
		t.Fatalf("topic log: %+v", tl)
	}
	if h.reads[len(h.reads)-1] != adminapi.ReadLinearizable {
		t.Fatal("a read without read= is not linearizable")
	}
	for q, want := range map[string]adminapi.Where{"linearizable": adminapi.ReadLinearizable, "home": adminapi.ReadHome, "local": adminapi.ReadLocal} {
		if code, _ := call(t, s, "GET", "/v1/topics/sensors%2Ft1?read="+q, &tl); code != 200 || h.reads[len(h.reads)-1] != want {
			t.Fatalf("read=%s: status %d, reads %v", q, code, h.reads)
		}
	}
	// Topics the mux would clean: empty levels, a last level "messages".
	for _, topic := range []string{"a//b", "/lead", "trail/", "x/messages"} {
		var tl adminapi.TopicLog
		if code, eb := call(t, s, "GET", client.TopicPath(topic), &tl); code != 200 || tl.Topic != topic {
			t.Fatalf("%q: status %d %+v, topic %q", topic, code, eb, tl.Topic)
		}
	}
}

func TestHistoryMessages(t *testing.T) {
	s, _ := newHistoryServer(t)
	var p adminapi.LogPage
	if code, eb := call(t, s, "GET", "/v1/topics/sensors%2Ft1/messages", &p); code != 200 {
		t.Fatalf("status %d: %+v", code, eb)
	}
	if len(p.Messages) != 4 || p.From != 1 || p.Next != 5 || p.Messages[0].Payload != "a" || p.Messages[0].Index != 1 {
		t.Fatalf("earliest: %+v", p)
	}
	if m := p.Messages[3]; m.Payload != "" || m.PayloadBase64 != "/wA=" || m.Bytes != 2 {
		t.Fatalf("binary payload: %+v", m)
	}
	if len(p.Messages[0].UserProperties) != 1 || p.Messages[0].QoS != 1 {
		t.Fatalf("properties: %+v", p.Messages[0])
	}
	call(t, s, "GET", "/v1/topics/sensors%2Ft1/messages?from=2&limit=2", &p)
	if len(p.Messages) != 2 || p.Messages[0].Index != 2 || p.Messages[1].Index != 3 || p.Next != 4 {
		t.Fatalf("from=2&limit=2: %+v", p)
	}
	call(t, s, "GET", "/v1/topics/sensors%2Ft1/messages?from=latest", &p)
	if len(p.Messages) != 1 || p.Messages[0].Index != 4 || p.From != 4 || p.Next != 5 {
		t.Fatalf("latest: %+v", p)
	}
	call(t, s, "GET", "/v1/topics/sensors%2Ft1/messages?from=9", &p)
	if len(p.Messages) != 0 || p.Next != 9 || p.Latest != 4 || p.Messages == nil {
		t.Fatalf("past the latest: %+v", p)
	}
	call(t, s, "GET", "/v1/topics/old/messages", &p)
	if len(p.Messages) != 2 || p.From != 5 || p.Messages[0].Index != 5 {
		t.Fatalf("earliest after retention: %+v", p)
	}
	p = adminapi.LogPage{}
	if code, eb := call(t, s, "GET", "/v1/topics/emptied/messages?from=latest", &p); code != 200 || len(p.Messages) != 0 || p.Next != 8 || p.Count != 0 {
		t.Fatalf("latest of a log retention emptied: %d %+v %+v", code, eb, p)
	}
	call(t, s, "GET", "/v1/topics/x%2Fmessages/messages", &p)
	if p.Topic != "x/messages" || len(p.Messages) != 1 {
		t.Fatalf("topic ending in messages: %+v", p)
	}
}

func TestHistoryErrors(t *testing.T) {
	s, _ := newHistoryServer(t)
	cases := []struct {
		method, target string
		status         int
		code           string
	}{
		{"GET", "/v1/topics/nothing%2Fhere", 404, "unknown_topic"},
		{"GET", "/v1/topics/nothing/messages", 404, "unknown_topic"},
		{"GET", "/v1/topics/direct%2Fx", 409, "not_sequenced"},
		{"GET", "/v1/topics/down%2Fx/messages", 503, "unavailable"},
		{"GET", "/v1/topics/old/messages?from=2", 410, "compacted"},
		{"GET", "/v1/topics/sensors/t1", 400, "bad_topic"},
		{"GET", "/v1/topics/sensors/t1/messages", 400, "bad_topic"},
		{"GET", "/v1/topics/sensors%2F%2B/messages", 400, "bad_topic"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?from=0", 400, "bad_from"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?from=-1", 400, "bad_from"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?from=first", 400, "bad_from"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?limit=0", 400, "bad_limit"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?limit=1001", 400, "bad_limit"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?limit=", 400, "bad_limit"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?read=any", 400, "bad_read"},
		{"GET", "/v1/topics/sensors%2Ft1/messages?form=1", 400, "bad_query"},
		{"GET", "/v1/topics/sensors%2Ft1?from=1", 400, "bad_query"},
		{"POST", "/v1/topics/sensors%2Ft1/messages", 405, "method_not_allowed"},
	}
	for _, c := range cases {
		code, eb := call(t, s, c.method, c.target, nil)
		if code != c.status || eb.Code != c.code {
			t.Errorf("%s %s: %d %q (%s), want %d %q", c.method, c.target, code, eb.Code, eb.Error, c.status, c.code)
		}
	}
	// The 410 names the first index held.
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/topics/old/messages?from=2", nil))
	var body struct{ First uint64 }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.First != 5 {
		t.Fatalf("410 body: %q", rec.Body.String())
	}
	// The hint for an unencoded topic shows the encoded path.
	_, eb := call(t, s, "GET", "/v1/topics/sensors/t1/messages", nil)
	if !strings.HasSuffix(eb.Error, "/v1/topics/sensors%2Ft1/messages") {
		t.Fatalf("no encoding hint: %q", eb.Error)
	}
}

func TestHistoryClient(t *testing.T) {
	s, _ := newHistoryServer(t)
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := client.New(srv.URL, "")
	ctx := context.Background()
	tl, err := c.TopicLog(ctx, "sensors/t1")
	if err != nil || tl.Latest != 4 {
		t.Fatalf("TopicLog: %+v %v", tl, err)
	}
	for _, topic := range []string{"a//b", "/lead", "trail/", "x/messages"} {
		if tl, err := c.TopicLog(ctx, topic); err != nil || tl.Topic != topic {
			t.Fatalf("TopicLog(%q) over HTTP: %+v %v", topic, tl, err)
		}
	}
	p, err := c.LogMessages(ctx, "sensors/t1", client.LogQuery{From: "2", Limit: 1})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Payload != "b" {
		t.Fatalf("LogMessages: %+v %v", p, err)
	}
	_, err = c.LogMessages(ctx, "old", client.LogQuery{From: "1"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 410 || !strings.Contains(ae.Msg, "5") {
		t.Fatalf("compacted read: %v", err)
	}
}

// FuzzHistoryRequest sends arbitrary paths and queries to the history
// endpoints: every answer is 200 or a 4xx/503 with a JSON error body, never
// a panic or another 5xx; a 200 is for a topic the log holds.
func FuzzHistoryRequest(f *testing.F) {
	f.Add("sensors%2Ft1/messages", "from=latest&limit=3")
	f.Add("sensors%2Ft1", "read=local")
	f.Add("old/messages", "from=2")
	f.Add("a%2F%2Fb/messages", "from=18446744073709551615")
	f.Add("sensors/t1/messages", "limit=-1")
	f.Add("%2Flead/messages/x", "from=earliest&from=latest")
	f.Add("direct%2Fx", "")
	s, h := newHistoryServer(f)
	f.Fuzz(func(t *testing.T, path, query string) {
		u, err := url.Parse(adminapi.HistoryPrefix + path)
		if err != nil {
			return // not a request a client could send
		}
		u.RawQuery = query
		req := httptest.NewRequest("GET", "/", nil)
		req.URL = u
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		switch {
		case rec.Code == 200:
			var tl adminapi.TopicLog
			if err := json.Unmarshal(rec.Body.Bytes(), &tl); err != nil || h.logs[tl.Topic] == nil {
				t.Fatalf("200 for %q?%q: %q", path, query, rec.Body.String())
			}
		case rec.Code >= 400 && rec.Code < 500 || rec.Code == 503:
			var eb adminapi.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Code == "" {
				t.Fatalf("status %d without a JSON error body: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("status %d for %q?%q: %s", rec.Code, path, query, rec.Body.String())
		}
	})
}

// TestHistoryNeedsAToken: with tokens set, the history endpoints want one
// (they are routed before the mux, after the access check); a read token
// is enough.
func TestHistoryNeedsAToken(t *testing.T) {
	s, _ := newHistoryServer(t)
	s.SetTokens("admin-secret", "read-secret")
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"wrong", 401}, {"read-secret", 200}, {"admin-secret", 200}} {
		req := httptest.NewRequest("GET", "/v1/topics/sensors%2Ft1/messages", nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("token %q: %d, want %d", c.token, rec.Code, c.want)
		}
	}
}
