package clustertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// apiGet sends GET target to n's admin API and decodes a 200 answer into
// out; it returns the status and, for an error, its JSON body.
func apiGet(t *testing.T, n *Node, target string, out any) (int, adminapi.ErrorBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	n.Node.AdminHandler().ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	var eb adminapi.ErrorBody
	if rec.Code != http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Code == "" {
			t.Fatalf("%s on %s: status %d without a JSON error: %q", target, n.ID, rec.Code, rec.Body.String())
		}
		return rec.Code, eb
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("%s on %s: %v", target, n.ID, err)
	}
	return rec.Code, eb
}

// TestHistoryOverHTTP: messages published to sequenced topics (replicas 1
// and 3) read back over every node's admin API, the nodes without a
// replica of the group included (they read the home's); a direct topic, an
// unknown one and a read below retention get their errors.
func TestHistoryOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes, func(o *Options) {
			o.GroupSegmentBytes = 1024 // retention deletes whole segments: make them small
			prev := o.Config
			o.Config = func(cfg *config.Config) {
				prev(cfg)
				cfg.RetentionInterval = time.Second
			}
		})
		c.SetPolicy(
			fsm.Rule{Match: "one/#", Mode: fsm.Sequenced, Replicas: 1},
			fsm.Rule{Match: "three/#", Mode: fsm.Sequenced, Replicas: 3},
			fsm.Rule{Match: "short/#", Mode: fsm.Sequenced, Replicas: 1, Retention: &fsm.Retention{Messages: 5}},
			fsm.Rule{Match: "#", Mode: fsm.Direct},
		)
		pub := c.Node(1).Connect("pub", ConnectOptions{})
		const total = 30
		for _, topic := range []string{"one/a/b", "three/x"} {
			for i := range total {
				if code := pub.Publish(topic, byte(1+i%2), false, fmt.Sprintf("%s-%d", topic, i)); code != packet.Success {
					t.Fatalf("publish %s %d: %v", topic, i, code)
				}
			}
		}
		for _, topic := range []string{"one/a/b", "three/x"} {
			for _, n := range c.Nodes() {
				var tl adminapi.TopicLog
				if code, eb := apiGet(t, n, client.TopicPath(topic), &tl); code != 200 {
					t.Fatalf("%s on %s: %d %+v", topic, n.ID, code, eb)
				}
				if tl.First != 1 || tl.Latest != total || tl.Count != total || tl.Home == "" || !slices.Contains(tl.Replicas, tl.Home) || tl.Epoch == 0 {
					t.Fatalf("%s on %s: %+v", topic, n.ID, tl)
				}
				// All of it, in pages of 7.
				var got []adminapi.LogRecord
				next := "earliest"
				for len(got) < total {
					var p adminapi.LogPage
					if code, eb := apiGet(t, n, client.TopicPath(topic)+"/messages?limit=7&from="+next, &p); code != 200 {
						t.Fatalf("%s on %s from %s: %d %+v", topic, n.ID, next, code, eb)
					}
					if len(p.Messages) == 0 {
						t.Fatalf("%s on %s: no messages from %s, %d read", topic, n.ID, next, len(got))
					}
					got = append(got, p.Messages...)
					next = fmt.Sprint(p.Next)
				}
				for i, r := range got {
					if r.Index != uint64(i+1) || r.Payload != fmt.Sprintf("%s-%d", topic, i) || r.QoS != byte(1+i%2) || r.Publisher != "pub" {
						t.Fatalf("%s on %s: record %d: %+v", topic, n.ID, i, r)
					}
				}
				var p adminapi.LogPage
				apiGet(t, n, client.TopicPath(topic)+"/messages?from=latest", &p)
				if len(p.Messages) != 1 || p.Messages[0].Index != total {
					t.Fatalf("%s on %s: from=latest: %+v", topic, n.ID, p)
				}
			}
		}
		// A replicas-1 group lives on one node: the others served it from there.
		var tl adminapi.TopicLog
		apiGet(t, c.Node(0), client.TopicPath("one/a/b")+"?read=local", &tl)
		if len(tl.Replicas) != 1 {
			t.Fatalf("replicas 1: %+v", tl)
		}
		for _, n := range c.Nodes() {
			if slices.Contains(tl.Replicas, n.ID) {
				continue
			}
			var remote adminapi.TopicLog
			apiGet(t, n, client.TopicPath("one/a/b")+"?read=local", &remote)
			if remote.ServedBy != tl.Replicas[0] || remote.Latest != total {
				t.Fatalf("%s without a replica: %+v", n.ID, remote)
			}
		}

		// GET /v1/groups on every node, one group a page (limit=1,
		// following next): each group once, in id order, with its home's
		// figures.
		for _, n := range c.Nodes() {
			var gs []adminapi.GroupInfo
			for after, pages := "", 0; ; pages++ {
				if pages > 10 {
					t.Fatalf("%s: /v1/groups pages do not end", n.ID)
				}
				var page adminapi.GroupsPage
				apiGet(t, n, "/v1/groups?limit=1&after="+url.QueryEscape(after), &page)
				if len(page.Groups) > 1 {
					t.Fatalf("%s: limit=1 gave %d groups", n.ID, len(page.Groups))
				}
				gs = append(gs, page.Groups...)
				if page.Next == "" {
					break
				}
				after = page.Next
			}
			byID := map[string]adminapi.GroupInfo{}
			for i, g := range gs {
				if i > 0 && gs[i-1].ID >= g.ID {
					t.Fatalf("%s: /v1/groups pages out of order or repeated: %s then %s", n.ID, gs[i-1].ID, g.ID)
				}
				byID[g.ID] = g
			}
			for _, id := range []string{"one/a/b", "three/x"} {
				g, ok := byID[id]
				if !ok || g.Stats == nil {
					t.Fatalf("%s: /v1/groups has no figures for %s: %+v", n.ID, id, gs)
				}
				s := g.Stats
				if s.Node != g.Home || s.Leader != g.Home || s.Role != "leader" || s.Records != total || s.LatestSeq != total ||
					s.Topics != 1 || s.Bytes <= 0 || s.CommitIndex == 0 || g.Epoch == 0 {
					t.Fatalf("%s: group %s: %+v stats %+v", n.ID, id, g, *s)
				}
			}
		}

		for _, e := range []struct {
			target string
			status int
			code   string
		}{
			{client.TopicPath("plain/t"), 409, "not_sequenced"},
			{client.TopicPath("three/never") + "/messages", 404, "unknown_topic"},
			{"/v1/topics/three/x/messages", 400, "bad_topic"},
		} {
			if code, eb := apiGet(t, c.Node(2), e.target, nil); code != e.status || eb.Code != e.code {
				t.Fatalf("%s: %d %+v, want %d %s", e.target, code, eb, e.status, e.code)
			}
		}

		// Retention: a topic keeping 5 messages, 200 published with
		// 100-byte payloads over 1 KiB segments, loses its first ones.
		for i := range 200 {
			if code := pub.Publish("short/t", 1, false, fmt.Sprintf("%0100d", i)); code != packet.Success {
				t.Fatalf("publish short %d: %v", i, code)
			}
		}
		c.Eventually("retention removed the first records", func() bool {
			apiGet(t, c.Node(0), client.TopicPath("short/t"), &tl)
			return tl.First > 1
		})
		t.Logf("short/t after retention: first %d latest %d, served by %s", tl.First, tl.Latest, tl.ServedBy)
		code, eb := apiGet(t, c.Node(0), client.TopicPath("short/t")+"/messages?from=1", nil)
		if code != http.StatusGone || eb.Code != "compacted" {
			t.Fatalf("read below retention: %d %+v", code, eb)
		}
		var p adminapi.LogPage
		apiGet(t, c.Node(0), client.TopicPath("short/t")+"/messages?limit=1", &p)
		if len(p.Messages) != 1 || p.Messages[0].Index != p.First || p.Latest != 200 {
			t.Fatalf("earliest after retention: %+v", p)
		}
	})
}

// TestLinearizableReadsAcrossAPartition: the home of a replicas 3 group
// is cut off from the others, which elect a new leader and commit another
// record. A linearizable read (the default) never answers with the old
// bounds: on the cut-off node it fails with 503 (no leader it can reach
// vouches for them), on the majority side it sees the new record, and on
// the cut-off node after the heal too.
func TestLinearizableReadsAcrossAPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes)
		c.SetPolicy(fsm.Rule{Match: "lin/#", Mode: fsm.Sequenced, Replicas: 3})
		pub := c.Node(0).Connect("pub", ConnectOptions{})
		for i := range 5 {
			if code := pub.Publish("lin/a", 1, false, fmt.Sprint(i)); code != packet.Success {
				t.Fatalf("publish %d: %v", i, code)
			}
		}
		g, _ := c.Node(0).Node.Meta().State().Group("lin/a")
		home, other := -1, -1
		for i, n := range c.Nodes() {
			if n.ID == g.Home {
				home = i
			} else {
				other = i
			}
		}
		var tl adminapi.TopicLog
		if code, eb := apiGet(t, c.Node(home), client.TopicPath("lin/a"), &tl); code != 200 || tl.Latest != 5 || tl.ServedBy != g.Home {
			t.Fatalf("before the cut: %d %+v %+v", code, eb, tl)
		}
		c.Isolate(home)
		c.Eventually("a leader on the majority side", func() bool {
			for i, n := range c.Nodes() {
				if r := n.Node.Groups().Get("lin/a"); i != home && r != nil && r.Rep.IsLeader() {
					return true
				}
			}
			return false
		})
		p2 := c.Node(other).Connect("pub2", ConnectOptions{})
		if code := p2.Publish("lin/a", 1, false, "after the cut"); code != packet.Success {
			t.Fatalf("publish on the majority side: %v", code)
		}
		if code, eb := apiGet(t, c.Node(other), client.TopicPath("lin/a"), &tl); code != 200 || tl.Latest != 6 {
			t.Fatalf("majority side: %d %+v %+v", code, eb, tl)
		}
		code, eb := apiGet(t, c.Node(home), client.TopicPath("lin/a"), &tl)
		if code != http.StatusServiceUnavailable || eb.Code != "unavailable" {
			t.Fatalf("the cut-off home answered a linearizable read: %d %+v %+v", code, eb, tl)
		}
		t.Logf("cut-off home: %s", eb.Error)
		// Without the barrier, its own replica answers, and lags.
		if code, _ := apiGet(t, c.Node(home), client.TopicPath("lin/a")+"?read=local", &tl); code != 200 || tl.Latest != 5 {
			t.Fatalf("read=local on the cut-off home: %d %+v", code, tl)
		}
		c.Rejoin(home)
		c.Eventually("the healed node reads the new record", func() bool {
			code, _ := apiGet(t, c.Node(home), client.TopicPath("lin/a"), &tl)
			return code == 200 && tl.Latest == 6
		})
		var p adminapi.LogPage
		apiGet(t, c.Node(home), client.TopicPath("lin/a")+"/messages?from=6", &p)
		if len(p.Messages) != 1 || p.Messages[0].Payload != "after the cut" {
			t.Fatalf("record 6 after the heal: %+v", p)
		}
		// The same read in process, as a checker does it.
		tl, recs, err := c.Node(other).Node.ReadLinearizable(t.Context(), "lin/a", 6, 10)
		if err != nil || len(recs) != 1 || recs[0].Payload != "after the cut" || tl.Latest != 6 {
			t.Fatalf("ReadLinearizable: %+v %+v %v", tl, recs, err)
		}
	})
}
