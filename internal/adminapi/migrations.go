package adminapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"
)

// MigrationList is GET /v1/migrations: the migrations of every node that
// answered (or of the one node asked with ?node=), and which nodes those
// are. Each node keeps its own (the ones it ran as the group's home), so a
// node that did not answer is listed in Unanswered and its migrations are
// missing.
type MigrationList struct {
	// Migrations: the running ones first, oldest start first, then the
	// finished ones, the last to end first.
	Migrations []MigrationInfo `json:"migrations"`
	// Nodes that answered, sorted.
	Nodes []string `json:"nodes"`
	// Unanswered: nodes asked that did not answer in time, and why.
	Unanswered []NodeError `json:"unanswered,omitempty"`
}

// NodeError is a node that did not answer, and why.
type NodeError struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

// SortMigrations puts list in MigrationList's order: the running
// migrations first, oldest start first, then the others, the last to end
// first (ties by group, then node, so that the order is stable).
func SortMigrations(list []MigrationInfo) {
	slices.SortStableFunc(list, func(a, b MigrationInfo) int {
		ar, br := a.State == "running", b.State == "running"
		switch {
		case ar != br:
			if ar {
				return -1
			}
			return 1
		case ar:
			return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Node, b.Node))
		}
		return cmp.Or(b.ended().Compare(a.ended()), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Node, b.Node))
	})
}

// ended is when a finished migration ended.
func (m MigrationInfo) ended() time.Time {
	return m.Started.Add(time.Duration(m.TotalSeconds * float64(time.Second)))
}

// MigrationInfo is one entry of GET /v1/migrations: a migration of a
// placement group that Node carried out as the group's home.
type MigrationInfo struct {
	// Node ran it: the old home (the new one for a settle).
	Node  string `json:"node"`
	Group string `json:"group"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Reason is the decision's: violation, overload, manual, rebalance.
	Reason string `json:"reason"`
	// Kind is handover (one replica), replicated (the lead moves) or
	// settle (the new home removes the replicas the decision drops).
	Kind     string    `json:"kind"`
	Decision uint64    `json:"decision"`
	State    string    `json:"state"` // running, done, failed
	Step     string    `json:"step,omitempty"`
	Started  time.Time `json:"started"`
	// TotalSeconds is start to end (so far, while running); PauseSeconds
	// the time the group took no publish.
	TotalSeconds float64 `json:"total_seconds"`
	PauseSeconds float64 `json:"pause_seconds"`
	Error        string  `json:"error,omitempty"`
}

// MoveRequest is the body of POST /v1/migrations: move a sequenced topic's
// group (or a group named by its id) to a node.
type MoveRequest struct {
	Topic string `json:"topic"`
	To    string `json:"to"`
	// Timeout bounds the wait for the move to be done (a Go duration;
	// empty: 60s). The decision stays recorded if the wait ends first.
	Timeout string `json:"timeout,omitempty"`
}

// MoveResult answers POST /v1/migrations once the group's record names the
// new home with the decided replicas.
type MoveResult struct {
	Group   string   `json:"group"`
	From    string   `json:"from"`
	Home    string   `json:"home"`
	Voters  []string `json:"voters"`
	Epoch   uint64   `json:"epoch"`
	Seconds float64  `json:"seconds"`
}

// Errors a Migrator returns (wrapped).
var (
	// ErrMoveUnknown: no sequenced topic or group by that name, or no
	// registered node by that id.
	ErrMoveUnknown = errors.New("adminapi: unknown topic, group or node")
	// ErrMoveConflict: the group changed meanwhile, or another decision
	// (manual) is pending.
	ErrMoveConflict = errors.New("adminapi: the group changed or another move is pending")
	// ErrMoveTimeout: the decision is recorded but the move was not done
	// within the timeout.
	ErrMoveTimeout = errors.New("adminapi: the move was not done in time")
	// ErrMoveUnavailable: the node could not bring its metadata copy up
	// to the metadata leader's (none answered) to look the group up, so
	// it cannot tell whether the group exists (503; nothing decided).
	ErrMoveUnavailable = errors.New("adminapi: the metadata leader did not answer")
	// ErrUnknownNode: GET /v1/migrations?node= names no registered node.
	ErrUnknownNode = errors.New("adminapi: unknown node")
)

// Migrator is the node's migration executor and the operator's moves.
type Migrator interface {
	// Migrations gathers the running and recent migrations of node, or
	// of every registered node when node is "", in MigrationList's order,
	// within bounded time (a node that does not answer is Unanswered).
	Migrations(ctx context.Context, node string) (MigrationList, error)
	Move(ctx context.Context, req MoveRequest, timeout time.Duration) (MoveResult, error)
}

// WithMigrations adds GET /v1/migrations (the running and recent
// migrations of every node, or of ?node=ID; running first) and POST
// /v1/migrations (an operator's move, admin scope; answered when it is
// done).
func (s *Server) WithMigrations(m Migrator) *Server {
	s.mux.HandleFunc("GET /v1/migrations", func(w http.ResponseWriter, r *http.Request) {
		list, err := m.Migrations(r.Context(), r.URL.Query().Get("node"))
		switch {
		case errors.Is(err, ErrUnknownNode):
			WriteError(w, http.StatusNotFound, "not_found", err.Error())
			return
		case err != nil:
			WriteError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		if list.Migrations == nil {
			list.Migrations = []MigrationInfo{}
		}
		if list.Nodes == nil {
			list.Nodes = []string{}
		}
		writeJSON(w, http.StatusOK, list)
	})
	s.mux.HandleFunc("POST /v1/migrations", func(w http.ResponseWriter, r *http.Request) {
		var req MoveRequest
		body, err := io.ReadAll(io.LimitReader(r.Body, 256<<10))
		if err != nil {
			WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			WriteError(w, http.StatusBadRequest, "bad_request", "move request: "+err.Error())
			return
		}
		if req.Topic == "" || req.To == "" {
			WriteError(w, http.StatusBadRequest, "bad_request", "move request: topic and to are required")
			return
		}
		timeout := 60 * time.Second
		if req.Timeout != "" {
			d, err := time.ParseDuration(req.Timeout)
			if err != nil || d <= 0 || d > time.Hour {
				WriteError(w, http.StatusBadRequest, "bad_request", "timeout: not a duration from 1ns to 1h: "+req.Timeout)
				return
			}
			timeout = d
		}
		res, err := m.Move(r.Context(), req, timeout)
		switch {
		case errors.Is(err, ErrMoveUnknown):
			WriteError(w, http.StatusNotFound, "not_found", err.Error())
		case errors.Is(err, ErrMoveConflict):
			WriteError(w, http.StatusConflict, "conflict", err.Error())
		case errors.Is(err, ErrMoveTimeout):
			WriteError(w, http.StatusGatewayTimeout, "timeout", err.Error())
		case errors.Is(err, ErrMoveUnavailable):
			WriteError(w, http.StatusServiceUnavailable, "no_leader", err.Error())
		case err != nil:
			WriteError(w, http.StatusInternalServerError, "move_failed", err.Error())
		default:
			writeJSON(w, http.StatusOK, res)
		}
	})
	return s
}
