package adminapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

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
	// Groups returns up to limit groups whose ids sort after after
	// (bytewise; "" from the first), in id order, with their figures,
	// and whether groups follow the last one given.
	Groups(ctx context.Context, after string, limit int) (page []GroupInfo, more bool)
	// MetaBehind says why the records may lag the metadata group's (this
	// node's copy has not caught up with a leader since it started), ""
	// when they do not.
	MetaBehind() string
}

// GroupsPage is the answer to GET /v1/groups: a page of groups in id
// order. Next is the after= of the next page ("" when this is the last).
type GroupsPage struct {
	Groups []GroupInfo `json:"groups"`
	Next   string      `json:"next"`
	// MetaBehind: the node answering has a metadata copy that has not
	// caught up with the group since it started (it reached no leader
	// yet): its records may name homes that changed meanwhile, and groups
	// created meanwhile are missing. Ask another node.
	MetaBehind string `json:"meta_behind,omitempty"`
}

// Limits of GET /v1/groups's limit parameter: each page asks the groups'
// homes for their figures, so a page is bounded rather than every group
// of a large cluster at once.
const (
	DefaultGroupsLimit = 100
	MaxGroupsLimit     = 1000
	// maxGroupID bounds after=: a group id travels with a one-byte length.
	maxGroupID = 255
)

// groupsTimeout bounds GET /v1/groups, the other nodes' answers included.
const groupsTimeout = 5 * time.Second

// GroupsQuery is a parsed GET /v1/groups query.
type GroupsQuery struct {
	After string
	Limit int
}

// ParseGroupsQuery reads after= (a group id; default "": from the first)
// and limit= (1 to MaxGroupsLimit, default DefaultGroupsLimit).
func ParseGroupsQuery(q url.Values) (GroupsQuery, error) {
	for k := range q {
		if k != "after" && k != "limit" {
			return GroupsQuery{}, badRequest("bad_query", "unknown parameter %q (want after, limit)", k)
		}
	}
	gq := GroupsQuery{After: q.Get("after"), Limit: DefaultGroupsLimit}
	if len(q["after"]) > 1 || len(q["limit"]) > 1 {
		return GroupsQuery{}, badRequest("bad_query", "after and limit may be given once each")
	}
	if len(gq.After) > maxGroupID || strings.ContainsFunc(gq.After, unicode.IsControl) {
		return GroupsQuery{}, badRequest("bad_after", "after: want a group id (the next of the previous page), at most %d bytes without control characters", maxGroupID)
	}
	if q.Has("limit") {
		l := q.Get("limit")
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxGroupsLimit {
			return GroupsQuery{}, badRequest("bad_limit", "limit: want a number from 1 to %d, not %q", MaxGroupsLimit, l)
		}
		gq.Limit = n
	}
	return gq, nil
}

// WithGroups adds GET /v1/groups?after=&limit=.
func (s *Server) WithGroups(g Groups) *Server {
	s.mux.HandleFunc("GET /v1/groups", func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseGroupsQuery(r.URL.Query())
		if err != nil {
			var re *requestError
			errors.As(err, &re)
			WriteError(w, http.StatusBadRequest, re.code, re.msg)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), groupsTimeout)
		defer cancel()
		gs, more := g.Groups(ctx, q.After, q.Limit)
		if len(gs) > q.Limit {
			gs, more = gs[:q.Limit], true
		}
		page := GroupsPage{Groups: nonNil(gs), MetaBehind: g.MetaBehind()}
		if more && len(gs) > 0 {
			page.Next = gs[len(gs)-1].ID
		}
		writeJSON(w, http.StatusOK, page)
	})
	return s
}
