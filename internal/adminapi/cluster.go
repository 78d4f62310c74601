package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// NodeInfo is one entry of GET /v1/nodes.
type NodeInfo struct {
	ID         string             `json:"id"`
	Site       string             `json:"site,omitempty"`
	Zone       string             `json:"zone,omitempty"`
	Tier       string             `json:"tier"`
	MQTTAddr   string             `json:"mqtt_addr,omitempty"`
	AdminAddr  string             `json:"admin_addr,omitempty"`
	PeerAddr   string             `json:"peer_addr,omitempty"`
	State      string             `json:"state"`
	Coordinate *Coordinate        `json:"coordinate,omitempty"`
	RTTms      map[string]float64 `json:"estimated_rtt_ms,omitempty"` // from coordinates, to every other node
	MeasuredMs map[string]float64 `json:"measured_rtt_ms,omitempty"`  // from this node's own probes, where known
}

// Coordinate is a Vivaldi network coordinate (serf's representation). Its
// distances estimate round-trip times.
type Coordinate struct {
	Vec        []float64 `json:"vec"`
	Error      float64   `json:"error"`
	Adjustment float64   `json:"adjustment"`
	Height     float64   `json:"height"`
}

// ClusterInfo is GET /v1/cluster.
type ClusterInfo struct {
	NodeID      string            `json:"node_id"`
	Leader      string            `json:"leader"`
	LeaderAddr  string            `json:"leader_addr,omitempty"`
	IsLeader    bool              `json:"is_leader"`
	Servers     []ServerInfo      `json:"servers"`
	Applied     uint64            `json:"applied_index"`
	Policies    uint64            `json:"policies_version"`
	ServersErr  string            `json:"servers_error,omitempty"`
	Registered  []fsm.Node        `json:"registered_nodes"`
	GeneratedAt time.Time         `json:"generated_at"`
	Members     int               `json:"members"`
	Raft        map[string]string `json:"raft,omitempty"`
}

// ServerInfo is one member of the metadata group.
type ServerInfo struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// PolicySet is GET/PUT /v1/policies.
type PolicySet struct {
	Version uint64     `json:"version"`
	Rules   []fsm.Rule `json:"rules"`
}

// putPolicies is the body of PUT /v1/policies. ExpectVersion, when set,
// makes the write a compare-and-swap against the current version.
type putPolicies struct {
	Rules         []fsm.Rule `json:"rules"`
	ExpectVersion *uint64    `json:"expect_version,omitempty"`
}

// ClusterView is what the cluster endpoints read and change: the members
// (from gossip), the metadata group and the policy rules.
type ClusterView interface {
	Nodes() []NodeInfo
	Cluster(ctx context.Context) ClusterInfo
	Policies() PolicySet
	PutPolicies(ctx context.Context, rules []fsm.Rule, expect *uint64) (PolicySet, error)
	// WaitPolicies waits until this node's copy of the policies is at
	// version or later, or ctx ends.
	WaitPolicies(ctx context.Context, version uint64) error
}

// Timeouts of the cluster endpoints: reading the metadata group's view
// (its member list comes from the leader), and writing policy rules
// through it.
const (
	clusterReadTimeout = 5 * time.Second
	policyWriteTimeout = 10 * time.Second
	// policyWaitTimeout bounds GET /v1/policies?min_version=N.
	policyWaitTimeout = 10 * time.Second
)

// WithCluster adds /v1/nodes, /v1/cluster and /v1/policies.
func (s *Server) WithCluster(c ClusterView) *Server {
	s.mux.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.Nodes())
	})
	s.mux.HandleFunc("GET /v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), clusterReadTimeout)
		defer cancel()
		writeJSON(w, http.StatusOK, c.Cluster(ctx))
	})
	s.mux.HandleFunc("GET /v1/policies", func(w http.ResponseWriter, r *http.Request) {
		// ?min_version=N waits for this node's copy to reach version N:
		// a write through one node, then a read on another, sees it.
		if mv := r.URL.Query().Get("min_version"); mv != "" {
			v, err := strconv.ParseUint(mv, 10, 64)
			if err != nil {
				WriteError(w, http.StatusBadRequest, "bad_request", "min_version: want a policy version (a whole number)")
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), policyWaitTimeout)
			defer cancel()
			if err := c.WaitPolicies(ctx, v); err != nil {
				WriteError(w, http.StatusServiceUnavailable, "stale", fmt.Sprintf("this node has policy version %d; version %d did not reach it within %v (is the metadata group's leader reachable from it?)",
					c.Policies().Version, v, policyWaitTimeout))
				return
			}
		}
		writeJSON(w, http.StatusOK, c.Policies())
	})
	s.mux.HandleFunc("PUT /v1/policies", func(w http.ResponseWriter, r *http.Request) {
		var body putPolicies
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			WriteError(w, http.StatusBadRequest, "bad_json", "policies: "+err.Error())
			return
		}
		if body.Rules == nil {
			body.Rules = []fsm.Rule{}
		}
		ctx, cancel := context.WithTimeout(r.Context(), policyWriteTimeout)
		defer cancel()
		ps, err := c.PutPolicies(ctx, body.Rules, body.ExpectVersion)
		if err != nil {
			writeFSMError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ps)
	})
	return s
}

// fieldError is the error body for a rejected rule: which field and why.
type fieldError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Field string `json:"field,omitempty"`
}

func writeFSMError(w http.ResponseWriter, err error) {
	var fe *fsm.Error
	if errors.As(err, &fe) {
		status := http.StatusBadRequest
		switch {
		case errors.Is(err, fsm.ErrConflict):
			status = http.StatusConflict
		case errors.Is(err, fsm.ErrNotFound):
			status = http.StatusNotFound
		}
		writeJSON(w, status, fieldError{Error: fe.Error(), Code: string(fe.Code), Field: fe.Field})
		return
	}
	if errors.Is(err, context.DeadlineExceeded) {
		WriteError(w, http.StatusServiceUnavailable, "no_leader", "the metadata group did not answer in time: "+err.Error())
		return
	}
	WriteError(w, http.StatusInternalServerError, "internal", err.Error())
}
