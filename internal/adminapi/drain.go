package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// DrainRequest is the body of POST /v1/drain (an empty body is the default
// request).
type DrainRequest struct {
	// Leave removes the node from the cluster for good: clients are told
	// the server moved (MQTT 5 reason 0x9D instead of 0x9C) and the node
	// leaves the metadata group. Without it the node is expected back
	// (a rolling restart or upgrade).
	Leave bool `json:"leave,omitempty"`
	// Timeout bounds the wait for connected persistent sessions to be
	// taken over by other nodes (a Go duration, "30s"); empty: the node's
	// drain-timeout.
	Timeout string `json:"timeout,omitempty"`
}

// DrainReport is the answer of POST /v1/drain: what the drain did. The node
// stops once it has been sent.
type DrainReport struct {
	NodeID string `json:"node_id"`
	// Reason is the MQTT 5 DISCONNECT reason clients were given.
	Reason string `json:"reason"`
	// Disconnected counts the client connections ended.
	Disconnected int `json:"disconnected"`
	// Persistent counts the persistent sessions connected when the drain
	// began; Moved those of them another node took over in time. The
	// others stay in this node's data directory.
	Persistent int `json:"persistent_sessions"`
	Moved      int `json:"moved_sessions"`
	// OtherNodes counts the alive nodes the clients could go to.
	OtherNodes int `json:"other_nodes"`
	// LeadershipMoved: this node led the metadata group and handed it over.
	LeadershipMoved bool `json:"metadata_leadership_moved"`
	// LeftGroup: the node left the metadata group (Leave).
	LeftGroup bool `json:"left_metadata_group"`
	// HandOverSeconds is how long the sessions took to move (or the
	// timeout); Seconds the whole drain.
	HandOverSeconds float64 `json:"hand_over_seconds"`
	Seconds         float64 `json:"seconds"`
	// Warnings lists steps that did not complete; the drain still stops
	// the node.
	Warnings []string `json:"warnings,omitempty"`
}

// Drainer drains the node: stop accepting clients, disconnect them so that
// they reconnect to other nodes and take their sessions along, hand over
// the node's part of the metadata group, then stop.
type Drainer interface {
	Drain(ctx context.Context, req DrainRequest) (DrainReport, error)
}

// ErrDraining is returned (wrapped) by a Drainer already draining.
var ErrDraining = errors.New("adminapi: the node is already draining")

// ErrCannotLeave is returned (wrapped) by a Drainer that cannot leave the
// cluster as asked (the metadata group's last voter).
var ErrCannotLeave = errors.New("adminapi: the node cannot leave the cluster")

// WithDrain adds POST /v1/drain (admin scope, as every change).
func (s *Server) WithDrain(d Drainer) *Server {
	s.mux.HandleFunc("POST /v1/drain", func(w http.ResponseWriter, r *http.Request) {
		var req DrainRequest
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		if len(body) > 0 {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				WriteError(w, http.StatusBadRequest, "bad_request", "drain request: "+err.Error())
				return
			}
		}
		if req.Timeout != "" {
			if d, err := time.ParseDuration(req.Timeout); err != nil || d < 0 {
				WriteError(w, http.StatusBadRequest, "bad_request", "timeout: not a non-negative duration: "+req.Timeout)
				return
			}
		}
		// The drain runs to its end even if the caller goes away: a
		// half-drained node would serve nobody.
		rep, err := d.Drain(context.WithoutCancel(r.Context()), req)
		switch {
		case errors.Is(err, ErrDraining):
			WriteError(w, http.StatusConflict, "draining", err.Error())
		case errors.Is(err, ErrCannotLeave):
			WriteError(w, http.StatusConflict, "cannot_leave", err.Error())
		case err != nil:
			WriteError(w, http.StatusInternalServerError, "drain_failed", err.Error())
		default:
			writeJSON(w, http.StatusOK, rep)
		}
	})
	return s
}

// Remover removes another node from the cluster for good: from the
// metadata group, the node registry and the gossip membership. It refuses
// a node that is still alive unless force is set (drain that node with
// leave instead), and this node itself.
type Remover interface {
	RemoveNode(ctx context.Context, id string, force bool) error
}

// ErrNodeAlive is returned (wrapped) by a Remover asked to remove a node
// that is still alive, without force.
var ErrNodeAlive = errors.New("adminapi: the node is alive")

// WithRemove adds DELETE /v1/nodes/{id} (admin scope); ?force=true removes
// a node gossip still sees alive.
func (s *Server) WithRemove(rm Remover) *Server {
	s.mux.HandleFunc("DELETE /v1/nodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		force := r.URL.Query().Get("force") == "true"
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		err := rm.RemoveNode(ctx, id, force)
		switch {
		case errors.Is(err, ErrNodeAlive), errors.Is(err, ErrCannotLeave):
			WriteError(w, http.StatusConflict, "cannot_remove", err.Error())
		case err != nil:
			WriteError(w, http.StatusInternalServerError, "remove_failed", err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]string{"removed": id})
		}
	})
	return s
}
