package adminapi

import (
	"context"
	"net/http"
	"time"
)

// PlacementInfo is GET /v1/placement: every placement group (the groups of
// sequenced topics) with where it is homed, and what the metadata leader's
// placement manager saw of it in its last round.
type PlacementInfo struct {
	// Leader is the metadata leader, whose manager plans; Round and At are
	// its last round (0 and zero: none yet, or the leader did not answer).
	Leader string    `json:"leader"`
	Round  uint64    `json:"round"`
	At     time.Time `json:"at,omitzero"`
	// LeaderErr says why the leader's view is missing, if it is.
	LeaderErr string           `json:"leader_error,omitempty"`
	Groups    []PlacementGroup `json:"groups"`
	Nodes     []PlacementNode  `json:"nodes"`
	// Overloaded, Unrelieved (overloaded by load that moving groups would
	// not relieve) and Stuck (groups that needed a home and found none),
	// from the last round.
	Overloaded []string `json:"overloaded,omitempty"`
	Unrelieved []string `json:"unrelieved,omitempty"`
	Stuck      []string `json:"stuck,omitempty"`
	// Unmonitored counts groups left out of the last round: their home
	// has not reported.
	Unmonitored int `json:"unmonitored"`
	// Rounds, Violations, Decisions, DecisionsFailed and ReportsRefused
	// are the leader's manager's counters since it started.
	Rounds          uint64 `json:"rounds"`
	Violations      uint64 `json:"violations"`
	Decisions       uint64 `json:"decisions"`
	DecisionsFailed uint64 `json:"decisions_failed"`
	ReportsRefused  uint64 `json:"reports_refused"`
}

// PlacementGroup is one placement group.
type PlacementGroup struct {
	Group string `json:"group"`
	// Topics are some of its topics seen in monitoring reports (at most
	// 16).
	Topics []string `json:"topics,omitempty"`
	Rule   string   `json:"rule"`
	Home   string   `json:"home"`
	Voters []string `json:"voters"`
	Epoch  uint64   `json:"epoch"`
	// Monitored: the last round planned it. Then EtMs is E(t), the
	// estimated worst-case one-way publisher-to-subscriber latency through
	// its home (the pending decision's home, if any), LthMs the rule's
	// latency_ms (0: none), and Violated says E(t) > Lth.
	Monitored bool    `json:"monitored"`
	EtMs      float64 `json:"e_t_ms"`
	LthMs     float64 `json:"lth_ms"`
	Violated  bool    `json:"violated"`
	Producers int     `json:"producers"`
	Consumers int     `json:"consumers"`
	RateIn    float64 `json:"rate_in"`
	RateOut   float64 `json:"rate_out"`
	// LastMove is the last change of its home (nil: never moved since it
	// was created); Pending the decision not yet carried out.
	LastMove *PlacementMove     `json:"last_move,omitempty"`
	Pending  *PlacementDecision `json:"pending,omitempty"`
}

// PlacementMove is a home change: why (migration, rebalance, manual,
// failover) and when.
type PlacementMove struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// PlacementDecision is a recorded decision: the home and voters the group
// should have, why (violation, overload, manual, rebalance) and when.
type PlacementDecision struct {
	Home   string    `json:"home"`
	Voters []string  `json:"voters"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// PlacementNode is one candidate home with its load, from its last report.
type PlacementNode struct {
	ID      string  `json:"id"`
	CPU     float64 `json:"cpu"`
	Memory  float64 `json:"memory"`
	Network float64 `json:"network"`
	MsgIn   float64 `json:"msg_in"`
	MsgOut  float64 `json:"msg_out"`
}

// Placement reads live placement's view: the metadata's records with the
// leader's last round.
type Placement interface {
	Placement(ctx context.Context) PlacementInfo
}

// placementTimeout bounds asking the metadata leader for its last round.
const placementTimeout = 5 * time.Second

// WithPlacement adds GET /v1/placement.
func (s *Server) WithPlacement(p Placement) *Server {
	s.mux.HandleFunc("GET /v1/placement", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), placementTimeout)
		defer cancel()
		writeJSON(w, http.StatusOK, p.Placement(ctx))
	})
	return s
}
