package client

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/sextantmq/sextant/internal/adminapi"
)

// TopicPath is the admin API path of a sequenced topic's log: the topic
// percent-encoded as one segment ('/' as %2F, a "." or ".." level too so
// no proxy cleans it away).
func TopicPath(topic string) string {
	seg := url.PathEscape(topic)
	if seg == "." || seg == ".." {
		seg = strings.ReplaceAll(seg, ".", "%2E")
	}
	return adminapi.HistoryPrefix + seg
}

// TopicLog is GET /v1/topics/{topic}: a sequenced topic's bounds, group,
// home and replicas, as the group's home knows them.
func (c *Client) TopicLog(ctx context.Context, topic string) (adminapi.TopicLog, error) {
	var tl adminapi.TopicLog
	return tl, c.do(ctx, "GET", TopicPath(topic), nil, &tl)
}

// LogQuery selects records of a sequenced topic.
type LogQuery struct {
	// From is an index ("42"), "earliest" or "latest"; "" is earliest.
	From string
	// Limit is at most adminapi.MaxLogLimit; 0 is the API's default.
	Limit int
	// Read is linearizable (the API's default when empty: at the group's
	// leader after a Raft barrier), home (the home's replica, no barrier)
	// or local (the answering node's replica when it has one).
	Read string
}

// LogMessages is GET /v1/topics/{topic}/messages: records of a sequenced
// topic from q.From.
func (c *Client) LogMessages(ctx context.Context, topic string, q LogQuery) (adminapi.LogPage, error) {
	v := url.Values{}
	if q.From != "" {
		v.Set("from", q.From)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Read != "" {
		v.Set("read", q.Read)
	}
	path := TopicPath(topic) + "/messages"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var page adminapi.LogPage
	return page, c.do(ctx, "GET", path, nil, &page)
}

// Groups is GET /v1/groups: every placement group with its home, replicas
// and the figures of its home's replica.
func (c *Client) Groups(ctx context.Context) ([]adminapi.GroupInfo, error) {
	var gs []adminapi.GroupInfo
	return gs, c.do(ctx, "GET", "/v1/groups", nil, &gs)
}
