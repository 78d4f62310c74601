package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/sextantmq/sextant/internal/adminapi"
)

// Clients is GET /v1/clients: the connected clients.
func (c *Client) Clients(ctx context.Context) ([]adminapi.ClientInfo, error) {
	var cs []adminapi.ClientInfo
	return cs, c.do(ctx, "GET", "/v1/clients", nil, &cs)
}

// Client is GET /v1/clients/{id}: one session in full (404 when the node
// holds none for id).
func (c *Client) Client(ctx context.Context, id string) (adminapi.ClientDetail, error) {
	var d adminapi.ClientDetail
	return d, c.do(ctx, "GET", "/v1/clients/"+url.PathEscape(id), nil, &d)
}

// Kick is DELETE /v1/clients/{id}: disconnect the client (MQTT 5:
// DISCONNECT 0x98); with discard its session ends too.
func (c *Client) Kick(ctx context.Context, id string, discard bool) (adminapi.KickResult, error) {
	var r adminapi.KickResult
	path := "/v1/clients/" + url.PathEscape(id)
	if discard {
		path += "?discard_session=true"
	}
	return r, c.do(ctx, "DELETE", path, nil, &r)
}

// Sessions is GET /v1/sessions: every session the node holds.
func (c *Client) Sessions(ctx context.Context) ([]adminapi.SessionInfo, error) {
	var ss []adminapi.SessionInfo
	return ss, c.do(ctx, "GET", "/v1/sessions", nil, &ss)
}

// Subscriptions is GET /v1/subscriptions (of one client when clientID is
// not "").
func (c *Client) Subscriptions(ctx context.Context, clientID string) ([]adminapi.SubscriptionInfo, error) {
	var ss []adminapi.SubscriptionInfo
	path := "/v1/subscriptions"
	if clientID != "" {
		path += "?client=" + url.QueryEscape(clientID)
	}
	return ss, c.do(ctx, "GET", path, nil, &ss)
}

// Retained is GET /v1/retained: the retained messages whose topic filter
// matches (at most limit; 0: the API's default).
func (c *Client) Retained(ctx context.Context, filter string, limit int) ([]adminapi.RetainedInfo, error) {
	var rs []adminapi.RetainedInfo
	return rs, c.do(ctx, "GET", "/v1/retained"+listQuery(filter, limit), nil, &rs)
}

// Topics is GET /v1/topics: the topics the node holds something for,
// matching filter (at most limit; 0: the API's default).
func (c *Client) Topics(ctx context.Context, filter string, limit int) ([]adminapi.TopicInfo, error) {
	var ts []adminapi.TopicInfo
	return ts, c.do(ctx, "GET", "/v1/topics"+listQuery(filter, limit), nil, &ts)
}

func listQuery(filter string, limit int) string {
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
