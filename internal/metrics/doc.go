// Package metrics owns a node's Prometheus registry and the typed metric
// sets components record into. Each node has its own registry (no globals),
// so several nodes can run in one process. Hot-path children (per-QoS
// counters, drop reasons) are resolved once at construction so recording is
// one atomic add. Nothing here blocks or does I/O; serving /metrics is the
// admin API's job.
package metrics
