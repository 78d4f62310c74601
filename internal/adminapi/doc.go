// Package adminapi owns the node's admin HTTP API: Prometheus /metrics,
// /healthz, /readyz and the versioned JSON API under /v1. It is the only
// control surface: the CLI and dashboard go through it. It reads node state
// through small interfaces defined here and never touches sessions or the
// store directly. Errors are JSON bodies {"error": "...", "code": "..."}
// with a 4xx/5xx status.
package adminapi
