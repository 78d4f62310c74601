package adminapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// GroupInfo is one entry of GET /v1/groups: a placement group's record in
// the metadata group, with the figures of one of its replicas (the home's
// when it answers).
type GroupInfo struct {
	ID   string `json:"id"`
	Rule string `json:"rule"`
	// Home orders the group's records; Replicas are its voters, Learners
	// replicas being added; Epoch counts home changes.
	Home       string        `json:"home"`
	Replicas   []string      `json:"replicas"`
	Learners   []string      `json:"learners,omitempty"`
	Epoch      uint64        `json:"epoch"`
	Retention  fsm.Retention `json:"retention"`
	Created    time.Time     `json:"created"`
	HomeReason string        `json:"home_reason,omitempty"`
	HomeSince  time.Time     `json:"home_since"`
	// Stats are the figures of the replica named in Stats.Node; nil when
	// none answered (StatsError says why).
	Stats      *GroupStats `json:"stats,omitempty"`
	StatsError string      `json:"stats_error,omitempty"`
}

// GroupStats are one replica's figures of a placement group.
type GroupStats struct {
	// Node is the node whose replica they are; Role its role in the
	// group (leader, follower, ...).
	Node string `json:"node"`
	Role string `json:"role"`
	// Leader is the group's leader as that replica knows it ("" when
	// none is known); Term the leader's term.
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
	// CommitIndex, AppliedIndex and LastIndex are positions in the
	// group's replicated log (the Raft log; a group with one replica
	// counts its batches).
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	// FirstSeq and LatestSeq bound the records the topic log holds (all
	// topics of the group together); Records, Bytes and Segments measure
	// it; Topics counts the topics with records.
	FirstSeq  uint64 `json:"first_seq"`
	LatestSeq uint64 `json:"latest_seq"`
	Records   uint64 `json:"records"`
	Bytes     int64  `json:"bytes"`
	Segments  int    `json:"segments"`
	Topics    int    `json:"topics"`
}

// Groups lists the placement groups.
type Groups interface {
	Groups(ctx context.Context) []GroupInfo
}

// groupsTimeout bounds GET /v1/groups, the other nodes' answers included.
const groupsTimeout = 5 * time.Second

// WithGroups adds GET /v1/groups.
func (s *Server) WithGroups(g Groups) *Server {
	s.mux.HandleFunc("GET /v1/groups", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), groupsTimeout)
		defer cancel()
		writeJSON(w, http.StatusOK, nonNil(g.Groups(ctx)))
	})
	return s
}
