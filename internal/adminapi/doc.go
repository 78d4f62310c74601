// Package adminapi owns the node's admin HTTP API: Prometheus /metrics,
// /healthz, /readyz and the versioned JSON API under /v1. It is the only
// control surface: the CLI and dashboard go through it. It reads node state
// through small interfaces defined here and never touches sessions or the
// store directly. Errors are JSON bodies {"error": "...", "code": "..."}
// with a 4xx/5xx status.
//
// Access: with bearer tokens set (SetTokens), every endpoint but /healthz
// and /readyz needs one; a read-scope token allows GET and HEAD (/metrics
// included), an admin-scope token everything. Without tokens the API is
// open; the node allows that only on a loopback address.
package adminapi
