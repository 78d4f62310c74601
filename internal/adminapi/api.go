package adminapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Status is the JSON body of GET /v1/status.
type Status struct {
	NodeID    string            `json:"node_id"`
	Version   string            `json:"version"`
	StartedAt time.Time         `json:"started_at"`
	Uptime    float64           `json:"uptime_seconds"`
	Listeners map[string]string `json:"listeners"`
	Broker    BrokerStatus      `json:"broker"`
}

// BrokerStatus is the MQTT part of Status.
type BrokerStatus struct {
	Connections   int `json:"connections"`
	Sessions      int `json:"sessions"`
	Online        int `json:"sessions_online"`
	Subscriptions int `json:"subscriptions"`
	Retained      int `json:"retained_messages"`
}

// Node is what the API reads from the node.
type Node interface {
	Status() Status
	Ready() error // nil when the node serves clients
}

// Server is the admin API's HTTP handler.
type Server struct {
	node Node
	reg  prometheus.Gatherer
	log  *slog.Logger
	mux  *http.ServeMux

	tokens atomic.Pointer[tokens] // nil: open
}

// New builds the handler.
func New(node Node, reg prometheus.Gatherer, log *slog.Logger) *Server {
	s := &Server{node: node, reg: reg, log: log, mux: http.NewServeMux()}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.node.Status())
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return s
}

// Handle registers an extra route (used by subsystems that add endpoints).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.node.Ready(); err != nil {
		WriteError(w, http.StatusServiceUnavailable, "not_ready", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// WriteError writes a JSON error response.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
