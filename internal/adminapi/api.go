package adminapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
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

	history History // nil: no history endpoints (WithHistory)
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
	s.mux.HandleFunc("/", s.noRoute)
	return s
}

// methods are those the API's routes use, in the order Allow lists them.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete}

// noRoute answers a request no route took: 405 with Allow when the path
// exists for other methods, else 404. (The catch-all route that gives
// errors a JSON body would otherwise turn every wrong method into a 404.)
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range methods {
		probe := *r
		probe.Method = m
		if _, pattern := s.mux.Handler(&probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.Join(allow, ", "))
		return
	}
	WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
}

// Handle registers an extra route (used by subsystems that add endpoints).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r) {
		return
	}
	// The history endpoints take a percent-encoded topic the mux would
	// decode, clean and redirect (history.go).
	if s.history != nil && len(r.URL.Path) > len(HistoryPrefix) && strings.HasPrefix(r.URL.Path, HistoryPrefix) {
		s.serveHistory(w, r)
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
