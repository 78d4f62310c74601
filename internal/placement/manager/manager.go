package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/placement"
)

// Sentinel errors.
var (
	// ErrConfig marks an invalid Config.
	ErrConfig = errors.New("manager: invalid config")
	// ErrReport marks a report refused by Receive: corrupt, sent by
	// another node than it names, older than the one held, or beyond the
	// node bound.
	ErrReport = errors.New("manager: report refused")
	// ErrUnknown marks a Move naming a topic without a group or a node
	// that is not registered.
	ErrUnknown = errors.New("manager: unknown")
)

// Meta is what the manager needs of the metadata group; *meta.Meta has
// these methods.
type Meta interface {
	IsLeader() bool
	State() fsm.State
	Propose(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// Config tunes a Manager. Zero fields take the defaults named.
type Config struct {
	// Interval is the time between timer rounds (default 5 s).
	Interval time.Duration
	// Planner is the planner's configuration (policy, overload thresholds,
	// hysteresis). Its Confirm and Cooldown count timer rounds, that is
	// intervals (PlannerConfig converts a cool-down time).
	Planner placement.Config
	// StaleAfter: a report received longer ago than this is not used
	// (default 3 intervals).
	StaleAfter time.Duration
	// EventGap is the least time between two event rounds, and between an
	// event round and the round before it (default Interval/5).
	EventGap time.Duration
	// MaxDecisions bounds the decisions proposed per round (default 256);
	// moves beyond it are planned again at the next round.
	MaxDecisions int
	// Clock is the time source (default clock.Real).
	Clock clock.Clock
	// Logger receives decisions and leadership changes (default: discard).
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Interval < 0 || c.StaleAfter < 0 || c.EventGap < 0 || c.MaxDecisions < 0 {
		return c, fmt.Errorf("%w: negative interval, staleness, event gap or decision bound", ErrConfig)
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = 3 * c.Interval
	}
	if c.EventGap == 0 {
		c.EventGap = c.Interval / 5
	}
	if c.MaxDecisions == 0 {
		c.MaxDecisions = 256
	}
	if c.Planner.Policy == nil {
		c.Planner.Policy = placement.Center{}
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// PlannerConfig builds the planner configuration from the node's settings:
// a policy name (placement.PolicyNames), the overload threshold in percent
// of CPU, memory and network, the output rate limit (messages/s, 0: none),
// the latency margin and its percentage, the rounds a latency move is
// confirmed over, and the cool-down after a move, as a time that interval
// rounds up to whole rounds.
func PlannerConfig(policy string, overloadPercent, maxOutRate int, margin time.Duration, marginPercent, confirm int,
	cooldown, interval time.Duration) (placement.Config, error) {
	p, err := placement.PolicyByName(policy)
	if err != nil {
		return placement.Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case overloadPercent < 1 || overloadPercent > 100:
		return placement.Config{}, fmt.Errorf("%w: overload %d%%, want 1 to 100", ErrConfig, overloadPercent)
	case maxOutRate < 0 || margin < 0 || marginPercent < 0 || marginPercent > 100 || confirm < 1 || cooldown < 0 || interval <= 0:
		return placement.Config{}, fmt.Errorf("%w: out rate, margin, confirmation, cool-down or interval out of range", ErrConfig)
	}
	return placement.Config{
		Policy: p, Overload: float64(overloadPercent) / 100, MaxOutRate: float64(maxOutRate),
		Margin: margin, MarginRatio: float64(marginPercent) / 100, Confirm: uint64(confirm),
		Cooldown: uint64((cooldown + interval - 1) / interval),
	}, nil
}

// Manager is the placement manager of one node. See the package comment.
type Manager struct {
	// immutable after New
	cfg  Config
	meta Meta
	log  *slog.Logger
	kick chan struct{} // an event round is wanted; capacity 1

	mu struct {
		sync.Mutex
		reports  map[string]*received
		status   Status
		refused  uint64
		proposed uint64
		failed   uint64
		rounds   uint64
		// violations counts groups found violated in a round that were
		// not in the round before.
		violations uint64
		violated   map[string]bool // groups violated in the last round
	}
}

type received struct {
	r  monitor.Report
	at time.Time
}

// New returns a Manager; Run starts it.
func New(cfg Config, meta Meta) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if meta == nil {
		return nil, fmt.Errorf("%w: no metadata", ErrConfig)
	}
	m := &Manager{cfg: cfg, meta: meta, log: cfg.Logger, kick: make(chan struct{}, 1)}
	m.mu.reports = map[string]*received{}
	return m, nil
}

// Receive takes a node's report, sent by from (the peer link's
// authenticated node id). It keeps the newest report per node and asks
// for an event round when the report shows an overloaded node or clients
// that appeared at (or moved farther from) an access node. It refuses, with
// an error wrapping ErrReport, a corrupt report, one naming another node,
// one not newer than the report held, and a new node beyond fsm.MaxNodes.
func (m *Manager) Receive(from string, body []byte) error {
	r, err := monitor.DecodeReport(body)
	if err == nil && r.Node != from {
		err = fmt.Errorf("names node %q", r.Node)
	}
	if err != nil {
		m.mu.Lock()
		m.mu.refused++
		m.mu.Unlock()
		return fmt.Errorf("%w: from %s: %w", ErrReport, from, err)
	}
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	prev := m.mu.reports[from]
	switch {
	case prev != nil && prev.r.Incarnation == r.Incarnation && r.Seq <= prev.r.Seq:
		err = fmt.Errorf("seq %d, holding %d", r.Seq, prev.r.Seq)
	case prev == nil && len(m.mu.reports) >= fsm.MaxNodes:
		err = fmt.Errorf("already %d nodes", fsm.MaxNodes)
	}
	if err != nil {
		m.mu.refused++
		m.mu.Unlock()
		return fmt.Errorf("%w: from %s: %w", ErrReport, from, err)
	}
	m.mu.reports[from] = &received{r: r, at: now}
	m.mu.Unlock()
	var old *monitor.Report
	if prev != nil {
		old = &prev.r
	}
	if m.overloaded(r.Load) || moved(old, &r, 2*m.cfg.Planner.Margin) {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

func (m *Manager) overloaded(l monitor.Load) bool {
	limit := m.cfg.Planner.Overload
	if limit <= 0 {
		limit = 0.85
	}
	return l.CPU > limit || l.Memory > limit || l.Network > limit ||
		m.cfg.Planner.MaxOutRate > 0 && l.MsgOut > m.cfg.Planner.MaxOutRate
}

// moved reports whether r shows clients of a topic at its node that prev
// did not (a side that was empty), or whose largest access round trip grew
// by more than margin: clients that arrived, possibly from elsewhere.
func moved(prev, r *monitor.Report, margin time.Duration) bool {
	old := map[string]*monitor.TopicReport{}
	if prev != nil {
		for i := range prev.Topics {
			old[prev.Topics[i].Topic] = &prev.Topics[i]
		}
	}
	grew := func(was, is monitor.Side) bool {
		return is.Count > 0 && (was.Count == 0 || is.MaxRTT > was.MaxRTT+margin)
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		o := old[t.Topic]
		if o == nil {
			o = &monitor.TopicReport{}
		}
		if grew(o.Producers, t.Producers) || grew(o.Consumers, t.Consumers) {
			return true
		}
	}
	return false
}

// Run plans every interval and on events, while this node leads the
// metadata group, until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	clk := m.cfg.Clock
	tick := clk.NewTimer(m.cfg.Interval)
	defer tick.Stop()
	var (
		st      runState
		event   clock.Timer // armed while an event waits out EventGap
		eventCh <-chan time.Time
	)
	defer func() {
		if event != nil {
			event.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			m.round(ctx, &st, false)
			tick.Reset(m.cfg.Interval)
		case <-m.kick:
			if eventCh != nil {
				continue // one is already waiting
			}
			wait := st.last.Add(m.cfg.EventGap).Sub(clk.Now())
			if wait <= 0 {
				m.round(ctx, &st, true)
				continue
			}
			if event == nil {
				event = clk.NewTimer(wait)
			} else {
				event.Reset(wait)
			}
			eventCh = event.C()
		case <-eventCh:
			eventCh = nil
			m.round(ctx, &st, true)
		}
	}
}

// runState is what Run's goroutine carries between rounds.
type runState struct {
	leading bool
	plan    placement.State
	last    time.Time // when the last round ran
	topics  topicGroups
	// shedding maps a node to the last time a group was seen decided away
	// from it, or moved away from it.
	shedding map[string]time.Time
	homes    map[string]string // each group's home in the last round
}

// relieving notes the nodes that groups are decided away from (a pending
// decision whose home is not the record's) or moved away from since the
// last round, and returns, for every node that had one, the last time it
// did. Until a report covers only time after that, the node's measured
// load still holds what the planner already took off it (it counts a
// pending move as done), so it must not shed again on that load.
func (st *runState) relieving(state fsm.State, now time.Time) map[string]time.Time {
	if st.shedding == nil {
		st.shedding = map[string]time.Time{}
	}
	homes := make(map[string]string, len(st.homes))
	for _, g := range state.Groups() {
		if d := g.Desired; d != nil && d.Home != g.Home {
			st.shedding[g.Home] = now
		}
		if was, ok := st.homes[g.ID]; ok && was != g.Home {
			st.shedding[was] = now
		}
		homes[g.ID] = g.Home
	}
	st.homes = homes
	return st.shedding
}

// Status is what the last round saw and did.
type Status struct {
	// Leading says whether this node plans (it leads the metadata group).
	Leading bool
	// Round and At are the last round's number and time; Event says it
	// was an event round.
	Round uint64
	At    time.Time
	Event bool
	// Nodes are the candidate homes (fresh reports with a coordinate),
	// Groups the groups planned, sorted by id.
	Nodes  []NodeStatus
	Groups []GroupStatus
	// Unmonitored counts the groups left out: their home has not
	// reported.
	Unmonitored int
	// Overloaded, Unrelieved and Stuck are the planner's (see
	// placement.Result).
	Overloaded, Unrelieved []string
	Stuck                  []string
	// Decisions are those recorded in this round.
	Decisions []Decision
	// Refused, Proposed and Failed count reports refused, decisions
	// recorded and decisions the metadata refused, since the manager
	// started.
	Refused, Proposed, Failed uint64
	// Rounds counts the rounds planned (timer and event rounds) and
	// Violations the times a group was found violated in a round when it
	// was not in the round before, since the manager started.
	Rounds, Violations uint64
}

// NodeStatus is one candidate home.
type NodeStatus struct {
	ID   string
	Load monitor.Load
}

// GroupStatus is one group as the last round saw it.
type GroupStatus struct {
	ID string
	// Home is where the planner took it to be: the pending decision's home
	// if any, else the record's.
	Home string
	// Worst is E(t) on Home, Threshold Lth (0: none), both one-way.
	Worst, Threshold time.Duration
	Violated         bool
	Rates            placement.Rates
	Producers        int
	Consumers        int
	// Topics names (some of) the group's topics seen in the reports, at
	// most 16, sorted.
	Topics []string
}

// Decision is one recorded decision.
type Decision struct {
	Group, From, To string
	Voters          []string
	Reason          fsm.Reason
	// Estimate is the policy's worst-case estimate on To (0 for
	// latency-agnostic policies); Worst was E(t) on From.
	Estimate, Worst time.Duration
	Index           uint64 // the metadata log index naming it
}

// Status returns what the last round saw and did.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.mu.status
	s.Refused, s.Proposed, s.Failed = m.mu.refused, m.mu.proposed, m.mu.failed
	s.Rounds, s.Violations = m.mu.rounds, m.mu.violations
	return s
}

// round runs one planning round if this node leads.
func (m *Manager) round(ctx context.Context, st *runState, event bool) {
	now := m.cfg.Clock.Now()
	st.last = now
	if !m.meta.IsLeader() {
		if st.leading {
			m.log.Info("placement manager stops: no longer the metadata leader")
			*st = runState{last: now}
			m.mu.Lock()
			m.mu.status, m.mu.violated = Status{}, nil
			m.mu.Unlock()
		}
		return
	}
	state := m.meta.State()
	if !st.leading {
		st.leading = true
		st.plan = m.seed(state, now)
		m.log.Info("placement manager starts: this node leads the metadata group", "cooling", len(st.plan.LastMove))
	}
	snap, view := m.snapshot(state, now, &st.topics, st.relieving(state, now))
	snap.Round = st.plan.Round + 1
	if event {
		if !view.urgent {
			return
		}
		snap.Round = max(st.plan.Round, 1)
	}
	res, next, err := placement.Plan(snap, m.cfg.Planner, st.plan)
	if err != nil {
		m.log.Error("placement: planning failed", "err", err)
		return
	}
	st.plan = next
	decisions := m.decide(ctx, state, &view, res, now, &st.plan)
	for _, d := range decisions {
		if d.From != "" {
			st.shedding[d.From] = now // the next round may find it already moved
		}
	}
	status := Status{
		Leading: true, Round: next.Round, At: now, Event: event,
		Nodes: view.nodes, Groups: view.groups, Unmonitored: view.unmonitored,
		Overloaded: ids(res.Overloaded), Unrelieved: ids(res.Unrelieved), Stuck: res.Stuck,
		Decisions: decisions,
	}
	violated := map[string]bool{}
	m.mu.Lock()
	for _, g := range status.Groups {
		if g.Violated {
			violated[g.ID] = true
			if !m.mu.violated[g.ID] {
				m.mu.violations++
			}
		}
	}
	m.mu.violated = violated
	m.mu.rounds++
	m.mu.status = status
	m.mu.Unlock()
}

func ids(ns []placement.NodeID) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n)
	}
	return out
}

// seed is the planner state a new leader starts from: the groups that
// moved (or were decided) within the cool-down keep cooling for what is
// left of it, counted in intervals.
func (m *Manager) seed(state fsm.State, now time.Time) placement.State {
	cool := m.cfg.Planner.Cooldown
	st := placement.State{Round: cool}
	if cool == 0 {
		return st
	}
	window := time.Duration(cool) * m.cfg.Interval
	for _, g := range state.Groups() {
		since := time.Time{}
		switch g.HomeReason {
		case fsm.ReasonMigration, fsm.ReasonRebalance, fsm.ReasonManual:
			since = g.HomeSince
		}
		if g.Desired != nil && g.Desired.At.After(since) {
			since = g.Desired.At
		}
		age := now.Sub(since)
		if since.IsZero() || age < 0 || age >= window {
			continue
		}
		left := cool - uint64(age/m.cfg.Interval) // rounds of cool-down still due, 1..cool
		if st.LastMove == nil {
			st.LastMove = map[string]uint64{}
		}
		// Plan cools a topic while round <= last + Cooldown; the first
		// round is cool + 1.
		st.LastMove[g.ID] = left
	}
	return st
}
