package client

import (
	"context"
	"fmt"
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

// GroupsPage is GET /v1/groups?after=&limit=: up to limit placement
// groups (0: the server's default) whose ids sort after after, in id
// order, with their homes, replicas and the figures of their homes'
// replicas.
func (c *Client) GroupsPage(ctx context.Context, after string, limit int) (adminapi.GroupsPage, error) {
	v := url.Values{}
	if after != "" {
		v.Set("after", after)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/groups"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var page adminapi.GroupsPage
	return page, c.do(ctx, "GET", path, nil, &page)
}

// Groups is every placement group: GET /v1/groups page after page.
func (c *Client) Groups(ctx context.Context) ([]adminapi.GroupInfo, error) {
	var all []adminapi.GroupInfo
	after := ""
	for {
		page, err := c.GroupsPage(ctx, after, 0)
		if err != nil {
			return all, err
		}
		all = append(all, page.Groups...)
		if page.Next == "" {
			return all, nil
		}
		if page.Next <= after {
			// Ids come in increasing order; a cursor that does not move
			// on would page forever.
			return all, fmt.Errorf("client: GET /v1/groups: next %q does not follow %q", page.Next, after)
		}
		after = page.Next
	}
}
