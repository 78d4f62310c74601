package placement

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Config tunes the planner. The zero value is usable: see the field comments
// for what zero means.
type Config struct {
	// Policy ranks candidate homes; nil means Centroid.
	Policy Policy
	// Overload is the CPU, memory or network utilisation above which a node
	// is overloaded; 0 means 0.85.
	Overload float64
	// MaxOutRate is R_th_out, the output messages/s above which a node is
	// overloaded; 0 means no limit.
	MaxOutRate float64
	// Margin and MarginRatio are the hysteresis on latency moves: a topic
	// moves for latency only when the policy's estimate on the new home is
	// lower than on the current one by more than
	// max(Margin, MarginRatio * estimate on the current home).
	Margin      time.Duration
	MarginRatio float64
	// Confirm is the number of consecutive rounds a latency move to the same
	// node must be indicated before it is made; 0 and 1 mean at once. Moves
	// for load or for a topic without a home are never delayed.
	Confirm uint64
	// Cooldown is the number of rounds after a topic moves during which it
	// is not moved again for latency or load (it is still re-homed if its
	// home leaves the snapshot).
	Cooldown uint64
}

// DefaultConfig is the planner configuration Sextant starts from: centroid
// policy, 85% utilisation, a 2 ms / 5% margin, latency moves confirmed over
// 3 rounds, and a 6-round cool-down.
func DefaultConfig() Config {
	return Config{
		Policy: Centroid{}, Overload: 0.85,
		Margin: 2 * time.Millisecond, MarginRatio: 0.05, Confirm: 3, Cooldown: 6,
	}
}

// State is what the planner carries from one round to the next. The zero
// value is the state before the first round. Plan never modifies the State
// passed in.
type State struct {
	// Round is the number of the last round planned.
	Round uint64
	// LastMove maps a topic to the round in which it last moved, for the
	// topics still cooling down.
	LastMove map[string]uint64
	// Streak maps a topic to the latency move indicated for it in the last
	// round and for how many consecutive rounds (see Config.Confirm).
	Streak map[string]Streak
}

// Streak is a latency move waiting for confirmation: indicated towards To
// in Rounds distinct rounds, the last of them Last.
type Streak struct {
	To     NodeID
	Rounds uint64
	Last   uint64
}

// Reason says why a topic moves.
type Reason uint8

const (
	// ReasonUnplaced: the topic had no home, or its home left the cluster.
	ReasonUnplaced Reason = iota + 1
	// ReasonLatency: E(t) exceeded Lth(t) and a better home exists.
	ReasonLatency
	// ReasonOverload: the topic was shed from an overloaded node.
	ReasonOverload
)

func (r Reason) String() string {
	switch r {
	case ReasonUnplaced:
		return "unplaced"
	case ReasonLatency:
		return "latency"
	case ReasonOverload:
		return "overload"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Move is one placement decision.
type Move struct {
	Topic    string
	From, To NodeID // From is "" for a topic without a home
	Reason   Reason
	// Estimate is the policy's worst-case estimate on To (0 for
	// latency-agnostic policies).
	Estimate time.Duration
	// Forced is set when no node could take the topic without overload and
	// it was put on the least bad one anyway (only for topics without a home).
	Forced bool
}

// Result is the outcome of one planning round.
type Result struct {
	// Moves, sorted by topic.
	Moves []Move
	// Stuck lists the topics, sorted, that needed a new home (latency
	// violation or shed from an overloaded node) but found none.
	Stuck []string
	// Overloaded lists the nodes found overloaded at the start of the round.
	Overloaded []NodeID
	// Unrelieved lists the overloaded nodes that shed nothing because
	// moving every topic they may shed (those not cooling down) would not
	// bring them under the threshold: their load is not their topics'
	// (connections, direct traffic).
	Unrelieved []NodeID
}

type pending struct {
	t       *Topic
	reason  Reason
	ranking Ranking
	choices []Candidate // F[t]
	rate    float64
}

// Plan runs one round of Algorithm 1 of ePulsar on snap: it collects the
// topics without a home, the topics whose E(t) exceeds Lth(t), and, from each
// overloaded node, its highest-rate topics until the node's projected load is
// under the threshold; then it places them in order of fewest latency-feasible
// nodes first, each on the best-ranked node that can host it without
// overload. Only topics whose departure lowers the load that is over its
// limit are shed, and only from a node that shedding can bring under it (see
// Result.Unrelieved). Topics moved within the last Cooldown rounds are left
// alone, and a latency move must gain more than the margin. Plan returns the
// moves and the state for the next round.
func Plan(snap Snapshot, cfg Config, prev State) (Result, State, error) {
	if err := snap.Validate(); err != nil {
		return Result{}, prev, err
	}
	if len(snap.Nodes) == 0 && len(snap.Topics) > 0 {
		return Result{}, prev, fmt.Errorf("%w: no nodes to place %d topics on", ErrSnapshot, len(snap.Topics))
	}
	policy := cfg.Policy
	if policy == nil {
		policy = Centroid{}
	}
	limit := cfg.Overload
	if limit <= 0 {
		limit = 0.85
	}
	round := prev.Round + 1
	if snap.Round != 0 {
		if snap.Round < prev.Round {
			return Result{}, prev, fmt.Errorf("%w: round %d is before the previous round %d", ErrSnapshot, snap.Round, prev.Round)
		}
		round = snap.Round
	}
	cooling := func(name string) bool {
		last, ok := prev.LastMove[name]
		return ok && round <= last+cfg.Cooldown
	}

	nodes := slices.Clone(snap.Nodes)
	slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	topics := make([]*Topic, len(snap.Topics))
	for i := range snap.Topics {
		topics[i] = &snap.Topics[i]
	}
	slices.SortFunc(topics, func(a, b *Topic) int { return cmp.Compare(a.Name, b.Name) })
	ld := newLoads(nodes, topics, limit, cfg.MaxOutRate)

	// Lines 15-17: topics without a home or violating their threshold.
	reasons := map[*Topic]Reason{}
	for _, t := range topics {
		switch {
		case ld.byNode[t.Home] == nil:
			reasons[t] = ReasonUnplaced
		case cooling(t.Name):
		case t.Threshold > 0 && t.Summary.Worst > t.Threshold:
			reasons[t] = ReasonLatency
		}
	}
	// Lines 18-21: shed the highest-rate topics of overloaded nodes.
	var res Result
	for _, nl := range ld.ordered {
		if !ld.overloaded(nl) {
			continue
		}
		res.Overloaded = append(res.Overloaded, nl.id)
		var hosted []*Topic
		for _, t := range topics {
			if t.Home == nl.id && !cooling(t.Name) {
				hosted = append(hosted, t)
			}
		}
		if !ld.relievable(nl, hosted) {
			res.Unrelieved = append(res.Unrelieved, nl.id)
			continue
		}
		slices.SortStableFunc(hosted, func(a, b *Topic) int {
			return cmp.Compare(b.Summary.Rates.Total(), a.Summary.Rates.Total())
		})
		for _, t := range hosted {
			if !ld.overloaded(nl) {
				break
			}
			if !ld.relieves(nl, t) {
				continue
			}
			reasons[t] = ReasonOverload
			ld.add(nl, t, -1)
		}
	}

	// PlaceTopics, lines 2-5: rank, then fewest feasible nodes first.
	var work []*pending
	for _, t := range topics {
		reason, ok := reasons[t]
		if !ok {
			continue
		}
		r := policy.Rank(t, nodes)
		choices := r.Candidates
		if r.Feasible > 0 {
			choices = r.Candidates[:r.Feasible]
		}
		work = append(work, &pending{t: t, reason: reason, ranking: r, choices: choices, rate: t.Summary.Rates.Total()})
	}
	slices.SortStableFunc(work, func(a, b *pending) int {
		return cmp.Or(cmp.Compare(len(a.choices), len(b.choices)), cmp.Compare(b.rate, a.rate))
	})

	// Lines 6-10: the best choice that can host the topic.
	next := State{Round: round, LastMove: map[string]uint64{}, Streak: map[string]Streak{}}
	for name, last := range prev.LastMove {
		if round < last+cfg.Cooldown {
			next.LastMove[name] = last
		}
	}
	for _, w := range work {
		mv, ok := place(w, ld, cfg)
		if ok && mv.To != w.t.Home && w.reason == ReasonLatency {
			streak := Streak{To: mv.To, Rounds: 1, Last: round}
			if last, found := prev.Streak[w.t.Name]; found && last.To == mv.To {
				streak.Rounds = last.Rounds + 1
				if last.Last == round { // an event round repeating the number
					streak.Rounds = last.Rounds
				}
			}
			if streak.Rounds < cfg.Confirm {
				next.Streak[w.t.Name] = streak
				continue
			}
		}
		switch {
		case ok && mv.To != w.t.Home:
			if from := ld.byNode[w.t.Home]; from != nil && w.reason != ReasonOverload {
				ld.add(from, w.t, -1)
			}
			ld.add(ld.byNode[mv.To], w.t, +1)
			res.Moves = append(res.Moves, mv)
			if cfg.Cooldown > 0 {
				next.LastMove[w.t.Name] = round
			}
		case !ok:
			res.Stuck = append(res.Stuck, w.t.Name)
			if w.reason == ReasonOverload {
				ld.add(ld.byNode[w.t.Home], w.t, +1) // it stays after all
			}
		}
	}
	slices.SortFunc(res.Moves, func(a, b Move) int { return cmp.Compare(a.Topic, b.Topic) })
	slices.Sort(res.Stuck)
	if len(next.LastMove) == 0 {
		next.LastMove = nil
	}
	if len(next.Streak) == 0 {
		next.Streak = nil
	}
	return res, next, nil
}

// place picks w's new home. ok is false when the topic needs a new home but
// none of its choices can host it; a returned move to the topic's own home
// means it stays.
func place(w *pending, ld *loads, cfg Config) (Move, bool) {
	t := w.t
	mv := Move{Topic: t.Name, From: t.Home, Reason: w.reason}
	if w.reason == ReasonUnplaced {
		mv.From = ""
	}
	for _, c := range w.choices {
		if c.Node == t.Home && w.reason == ReasonLatency {
			return Move{To: t.Home}, true // the best home that can host it is where it is
		}
		if c.Node == t.Home || !ld.canHost(ld.byNode[c.Node], t) {
			continue
		}
		if w.reason == ReasonLatency && !gainEnough(w.ranking, t.Home, c, cfg) {
			return Move{To: t.Home}, true
		}
		mv.To, mv.Estimate = c.Node, estimateOf(w.ranking, c)
		return mv, true
	}
	if w.reason != ReasonUnplaced {
		return Move{}, false
	}
	// A topic must have a home: the first other candidate that can host it,
	// else the least bad one, overloaded or not.
	for _, c := range w.ranking.Candidates[len(w.choices):] {
		if ld.canHost(ld.byNode[c.Node], t) {
			mv.To, mv.Estimate = c.Node, estimateOf(w.ranking, c)
			return mv, true
		}
	}
	c := w.choices[0]
	mv.To, mv.Estimate, mv.Forced = c.Node, estimateOf(w.ranking, c), true
	return mv, true
}

// gainEnough applies the hysteresis: a latency move needs the candidate's
// estimate to beat the current home's by more than the margin. Rankings that
// are not scored never gain.
func gainEnough(r Ranking, home NodeID, c Candidate, cfg Config) bool {
	if !r.Scored {
		return false
	}
	cur, found := time.Duration(0), false
	for _, x := range r.Candidates {
		if x.Node == home {
			cur, found = x.Estimate, true
			break
		}
	}
	if !found {
		return true
	}
	margin := max(cfg.Margin, time.Duration(cfg.MarginRatio*float64(cur)))
	return cur-c.Estimate > margin
}

func estimateOf(r Ranking, c Candidate) time.Duration {
	if !r.Scored {
		return 0
	}
	return c.Estimate
}
