// Package client is the Go client of the admin HTTP API, used by the CLI
// commands that inspect and change a running node (nodes, policy, ...). It
// speaks only HTTP/JSON to the API; it must not import broker internals.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// requestTimeout bounds one admin API request, answer included.
const requestTimeout = 15 * time.Second

// Client talks to one node's admin API.
type Client struct {
	base     string
	token    string
	http     *http.Client
	explicit bool // base named its scheme
}

// Option adjusts a Client.
type Option func(*Client)

// WithTLS makes the client speak HTTPS with cfg (for example a RootCAs pool
// holding the CA of a node's self-signed certificate); a base address
// without a scheme then means https://.
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) {
		c.http.Transport = &http.Transport{TLSClientConfig: cfg}
		if strings.HasPrefix(c.base, "http://") && !c.explicit {
			c.base = "https://" + strings.TrimPrefix(c.base, "http://")
		}
	}
}

// WithTimeout sets how long one request may take (default 15 s); a drain
// waits for sessions to move and needs longer.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.http.Timeout = d }
}

// New returns a client for the admin API at base ("http://host:port",
// "https://host:port" or "host:port"). token, if set, is sent as a bearer
// token.
func New(base, token string, opts ...Option) *Client {
	explicit := strings.Contains(base, "://")
	if !explicit {
		base = "http://" + base
	}
	c := &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Timeout: requestTimeout}, explicit: explicit}
	for _, o := range opts {
		o(c)
	}
	return c
}

// APIError is an error response of the API.
type APIError struct {
	Status int
	Code   string
	Field  string
	Msg    string
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (HTTP %d, %s, field %s)", e.Msg, e.Status, e.Code, e.Field)
	}
	return fmt.Sprintf("%s (HTTP %d, %s)", e.Msg, e.Status, e.Code)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil && speaksMQTT(ctx, req.URL.Host) {
			return fmt.Errorf("%w: %s answers MQTT: is it a client port? The admin API listens on the node's admin-addr "+
				"(127.0.0.1:8088 by default) (%w)", ErrNotAdminAPI, req.URL.Host, err)
		}
		return fmt.Errorf("admin API at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		var eb struct {
			Error, Code, Field string
		}
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(data))
		}
		return &APIError{Status: res.StatusCode, Code: eb.Code, Field: eb.Field, Msg: eb.Error}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("admin API %s: %w", path, err)
		}
	}
	return nil
}

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (adminapi.Status, error) {
	var s adminapi.Status
	return s, c.do(ctx, "GET", "/v1/status", nil, &s)
}

// Nodes is GET /v1/nodes.
func (c *Client) Nodes(ctx context.Context) ([]adminapi.NodeInfo, error) {
	var ns []adminapi.NodeInfo
	return ns, c.do(ctx, "GET", "/v1/nodes", nil, &ns)
}

// Cluster is GET /v1/cluster.
func (c *Client) Cluster(ctx context.Context) (adminapi.ClusterInfo, error) {
	var ci adminapi.ClusterInfo
	return ci, c.do(ctx, "GET", "/v1/cluster", nil, &ci)
}

// Policies is GET /v1/policies.
func (c *Client) Policies(ctx context.Context) (adminapi.PolicySet, error) {
	var ps adminapi.PolicySet
	return ps, c.do(ctx, "GET", "/v1/policies", nil, &ps)
}

// PoliciesAt is GET /v1/policies?min_version=N: the node answers once its
// copy of the policies has reached version minVersion (or 503 after a
// while).
func (c *Client) PoliciesAt(ctx context.Context, minVersion uint64) (adminapi.PolicySet, error) {
	var ps adminapi.PolicySet
	return ps, c.do(ctx, "GET", "/v1/policies?min_version="+strconv.FormatUint(minVersion, 10), nil, &ps)
}

// PutPolicies is PUT /v1/policies; expect (optional) makes it a
// compare-and-swap on the current version.
func (c *Client) PutPolicies(ctx context.Context, rules []fsm.Rule, expect *uint64) (adminapi.PolicySet, error) {
	var ps adminapi.PolicySet
	in := struct {
		Rules         []fsm.Rule `json:"rules"`
		ExpectVersion *uint64    `json:"expect_version,omitempty"`
	}{rules, expect}
	return ps, c.do(ctx, "PUT", "/v1/policies", in, &ps)
}

// IsStatus reports whether err is an API error with the given HTTP status.
func IsStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// Drain is POST /v1/drain: the node stops taking clients, waits for their
// persistent sessions to move to other nodes, hands over its part of the
// metadata group and then stops. It returns what the drain did.
func (c *Client) Drain(ctx context.Context, req adminapi.DrainRequest) (adminapi.DrainReport, error) {
	var rep adminapi.DrainReport
	return rep, c.do(ctx, "POST", "/v1/drain", req, &rep)
}

// Ready is GET /readyz: nil when the node serves clients, else why not
// (an *APIError with status 503 while starting, draining or stopping).
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, "GET", "/readyz", nil, nil)
}

// RemoveNode is DELETE /v1/nodes/{id}: remove another node from the
// cluster for good (force: even though gossip sees it alive).
func (c *Client) RemoveNode(ctx context.Context, id string, force bool) error {
	path := "/v1/nodes/" + url.PathEscape(id)
	if force {
		path += "?force=true"
	}
	return c.do(ctx, "DELETE", path, nil, nil)
}

// Migrations lists the running and recent migrations of every node (node
// ""), or of one node, with the nodes that answered and those that did not.
func (c *Client) Migrations(ctx context.Context, node string) (adminapi.MigrationList, error) {
	var out adminapi.MigrationList
	path := "/v1/migrations"
	if node != "" {
		path += "?node=" + url.QueryEscape(node)
	}
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Move moves a sequenced topic's group to a node and waits until it is
// done (or the request's timeout).
func (c *Client) Move(ctx context.Context, req adminapi.MoveRequest) (adminapi.MoveResult, error) {
	var out adminapi.MoveResult
	err := c.do(ctx, http.MethodPost, "/v1/migrations", req, &out)
	return out, err
}
