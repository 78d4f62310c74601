package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/run"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("migration: invalid config")

// DefaultWorkers is the default number of migrations a node runs at once
// (config placement-executors).
const DefaultWorkers = 16

// Timing.
const (
	// stepTimeout bounds one action (a proposal, a transfer, a wait for
	// the target).
	stepTimeout = 30 * time.Second
	// retryMin and retryMax bound the wait before a failed migration's
	// decision, still pending, is tried again.
	retryMin = time.Second
	retryMax = 30 * time.Second
	// proposeRetry is the wait before a proposal whose outcome was
	// unknown is made again.
	proposeRetry = 20 * time.Millisecond
	// pollEvery is how often the target is asked whether it caught up or
	// serves the group.
	pollEvery = 2 * time.Millisecond
	// settleWait: a decision carried out is not taken up again for this
	// long, while this node's metadata copy learns the change.
	settleWait = time.Second
	// keepRecent is how many finished migrations are kept for the API.
	keepRecent = 256
)

// Meta is what the driver needs of the metadata group (*meta.Meta).
type Meta interface {
	State() fsm.State
	Changed() <-chan struct{}
	Propose(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// Fencer is the home side of the publish path (*sequenced.Home).
type Fencer interface {
	Fence(ctx context.Context, group, to string) error
	Unfence(group, to string, redirect bool)
}

// Caller sends requests over the peer links (*peer.Manager).
type Caller interface {
	Call(ctx context.Context, node string, method byte, body []byte) ([]byte, error)
}

// Config configures a Driver.
type Config struct {
	NodeID string
	// Workers is how many migrations run at once (default DefaultWorkers).
	Workers  int
	Meta     Meta
	Replicas Replicas
	Home     Fencer
	// Peers reach the targets (nil: a node alone, which moves nothing).
	Peers Caller
	// Dir keeps the fence records (fences.go): a node restarted during a
	// handover fences those groups again until it settles them. Empty:
	// no records (tests).
	Dir        string
	Clock      clock.Clock
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Migration is one migration as GET /v1/migrations shows it.
type Migration struct {
	Group  string     `json:"group"`
	From   string     `json:"from"`
	To     string     `json:"to"`
	Reason fsm.Reason `json:"reason"`
	Kind   Kind       `json:"kind"`
	// Decision is the index of the decision carried out.
	Decision uint64 `json:"decision"`
	// State is running, done or failed; Step the action under way.
	State   State     `json:"state"`
	Step    Op        `json:"step,omitempty"`
	Started time.Time `json:"started"`
	// Total is the time from start to end (so far, while running); Pause
	// the time the group took no publish: from the fence to the target's
	// answer that it serves the group (or to the fence's end after a
	// failure).
	Total time.Duration `json:"total_ns"`
	Pause time.Duration `json:"pause_ns"`
	Error string        `json:"error,omitempty"`
	// Steps are the actions taken, with their outcome and time.
	Steps []Step `json:"steps,omitempty"`
}

// Step is one action of a migration.
type Step struct {
	Op     Op            `json:"op"`
	Result Result        `json:"result"`
	Took   time.Duration `json:"took_ns"`
}

// Driver runs this node's migrations. See the package comment.
type Driver struct {
	cfg     Config
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics
	work    chan string
	changed chan struct{}
	group   atomic.Pointer[run.Group] // Run's: workers, watcher, nudges

	mu struct {
		sync.Mutex
		running map[string]*Migration
		queued  map[string]bool
		retry   map[string]retryState
		recent  []Migration // newest last
		// recover: the handovers to settle from their fence records (found
		// at start, or left by a handover whose tail did not reach the
		// target after its switch committed), by group, until each is
		// settled.
		recover map[string]pendingRecovery
		// kept: the replicas held open (Replicas.Keep) for handovers
		// under way or to settle, by group.
		kept map[string]func()
	}
}

// pendingRecovery is a handover to settle, not before at.
type pendingRecovery struct {
	fence fenceRecord
	at    time.Time
	wait  time.Duration
}

type retryState struct {
	decision uint64
	at       time.Time
	wait     time.Duration
}

// New returns a driver; Run runs it.
func New(cfg Config) (*Driver, error) {
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	switch {
	case cfg.NodeID == "":
		return nil, fmt.Errorf("%w: no node id", ErrConfig)
	case cfg.Meta == nil || cfg.Replicas == nil || cfg.Home == nil:
		return nil, fmt.Errorf("%w: metadata, replicas and home side are required", ErrConfig)
	case cfg.Workers < 1 || cfg.Workers > 1024:
		return nil, fmt.Errorf("%w: %d workers, want 1 to 1024", ErrConfig, cfg.Workers)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{cfg: cfg, clock: cfg.Clock, log: cfg.Log, metrics: newMetrics(cfg.Registerer),
		work: make(chan string), changed: make(chan struct{}, 1)}
	d.mu.running = map[string]*Migration{}
	d.mu.queued = map[string]bool{}
	d.mu.retry = map[string]retryState{}
	d.mu.recover = map[string]pendingRecovery{}
	d.mu.kept = map[string]func(){}
	if cfg.Dir != "" {
		// Before the home side serves anything (the node starts its
		// peer links after this): a group this node may have handed
		// over while it was down takes no publish until settled.
		fences, err := readFences(cfg.Dir)
		if err != nil {
			return nil, err
		}
		for _, f := range fences {
			if err := cfg.Home.Fence(context.Background(), f.Group, f.To); err != nil {
				return nil, fmt.Errorf("migration: fencing %s again: %w", f.Group, err)
			}
			// The log may still have to be handed over, though the
			// record names the target.
			d.mu.kept[f.Group] = cfg.Replicas.Keep(f.Group)
			d.mu.recover[f.Group] = pendingRecovery{fence: f, wait: retryMin}
			cfg.Log.Warn("migration: restarted during a handover; the group stays fenced until the record says whose it is",
				"group", f.Group, "to", f.To, "epoch", f.Epoch)
		}
	}
	return d, nil
}

// Run runs the workers and the watcher until ctx ends.
func (d *Driver) Run(ctx context.Context) {
	g := run.NewGroup(ctx)
	d.group.Store(g)
	for range d.cfg.Workers {
		g.Go(d.worker)
	}
	g.Go(d.watch)
	<-ctx.Done()
	g.Stop()
	g.Wait()
}

// watch hands the groups whose decisions this node carries out to the
// workers, as the metadata changes.
func (d *Driver) watch(ctx context.Context) {
	timer := d.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		ch := d.cfg.Meta.Changed()
		wait := d.dispatch(ctx)
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-d.changed:
		case <-timer.C():
		}
	}
}

// dispatch queues the pending decisions of the groups this node is home
// of; it returns when to look again for ones waiting to be retried.
func (d *Driver) dispatch(ctx context.Context) time.Duration {
	now := d.clock.Now()
	var next time.Duration
	d.mu.Lock()
	var recovering []string
	for id, p := range d.mu.recover {
		if now.Before(p.at) {
			if w := p.at.Sub(now); next == 0 || w < next {
				next = w
			}
			continue
		}
		if d.mu.running[id] == nil && !d.mu.queued[id] {
			d.mu.queued[id] = true
			recovering = append(recovering, id)
		}
	}
	d.mu.Unlock()
	slices.Sort(recovering)
	for _, id := range recovering {
		select {
		case d.work <- id:
		case <-ctx.Done():
			return 0
		}
	}
	for _, g := range d.cfg.Meta.State().Decisions(d.cfg.NodeID) {
		d.mu.Lock()
		busy := d.mu.running[g.ID] != nil || d.mu.queued[g.ID]
		r, failed := d.mu.retry[g.ID]
		if failed && r.decision == g.Desired.Index && now.Before(r.at) {
			busy = true
			if w := r.at.Sub(now); next == 0 || w < next {
				next = w
			}
		}
		if !busy {
			d.mu.queued[g.ID] = true
		}
		d.mu.Unlock()
		if busy {
			continue
		}
		// The queue is the workers: a send waits for a free worker, and
		// the groups behind it wait in State().Decisions.
		select {
		case d.work <- g.ID:
		case <-ctx.Done():
			return 0
		}
	}
	return next
}

func (d *Driver) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-d.work:
			d.migrate(ctx, id)
			d.mu.Lock()
			delete(d.mu.queued, id)
			d.mu.Unlock()
			select {
			case d.changed <- struct{}{}:
			default:
			}
		}
	}
}

// migrate carries out group id's pending decision, if this node is still
// its home.
func (d *Driver) migrate(ctx context.Context, id string) {
	st := d.cfg.Meta.State()
	rec, ok := st.Group(id)
	d.mu.Lock()
	p, recovering := d.mu.recover[id]
	d.mu.Unlock()
	if recovering {
		f := p.fence
		m, a := Recover(d.cfg.NodeID, id, f.To, f.Epoch, f.Reason)
		d.execute(ctx, m, a, rec, &Migration{Group: id, From: m.From, To: m.To, Reason: f.Reason, Kind: m.Kind,
			State: StateRunning, Started: d.clock.Now()})
		d.mu.Lock()
		if !m.Resume {
			delete(d.mu.recover, id)
		} else if ctx.Err() == nil {
			// Tried again, the group fenced meanwhile: the target is
			// down, or refuses (then an operator must step in).
			p.wait = min(2*p.wait, retryMax)
			p.at = d.clock.Now().Add(p.wait)
			d.mu.recover[id] = p
		}
		d.mu.Unlock()
		return
	}
	if !ok || rec.Desired == nil || rec.Home != d.cfg.NodeID {
		return
	}
	if _, ok := st.Node(rec.Desired.Home); !ok {
		d.withdraw(ctx, rec, "the target left the cluster")
		return
	}
	m, a, ok := Plan(d.cfg.NodeID, rec)
	if !ok {
		return
	}
	d.execute(ctx, m, a, rec, &Migration{Group: id, From: m.From, To: m.To, Reason: rec.Desired.Reason, Kind: m.Kind,
		Decision: rec.Desired.Index, State: StateRunning, Started: d.clock.Now()})
}

// execute runs machine m from its first action a, recording it in mig.
func (d *Driver) execute(ctx context.Context, m *Machine, a Action, rec fsm.Group, mig *Migration) {
	id, start := m.Group, mig.Started
	d.mu.Lock()
	d.mu.running[id] = mig
	d.mu.Unlock()
	d.metrics.started.Inc()
	d.metrics.running.Inc()
	d.log.Info("migration starts", "group", id, "from", m.From, "to", m.To, "kind", m.Kind, "reason", mig.Reason)

	if m.Kind == KindHandover || m.Kind == KindRecover {
		// The old home's log must stay readable once the switch names
		// the target: held open until the handover is settled.
		d.mu.Lock()
		if d.mu.kept[id] == nil {
			d.mu.kept[id] = d.cfg.Replicas.Keep(id)
		}
		d.mu.Unlock()
	}
	x := &exec{d: d, m: m, rec: rec}
	var pauseStart, pauseEnd time.Time
	for more := m.State == StateRunning; more; {
		if ctx.Err() != nil {
			// The node stops: a fence dies with it (the home side is
			// gone); the decision stays pending for whoever is home.
			m.State, m.Err = StateFailed, "node stopping"
			break
		}
		d.mu.Lock()
		mig.Step = a.Op
		d.mu.Unlock()
		if (a.Op == OpFence || m.Kind == KindRecover) && pauseStart.IsZero() {
			pauseStart = d.clock.Now()
		}
		t0 := d.clock.Now()
		o := x.do(ctx, a)
		d.mu.Lock()
		mig.Steps = append(mig.Steps, Step{Op: a.Op, Result: o.Result, Took: d.clock.Now().Sub(t0)})
		d.mu.Unlock()
		if o.Result == ResultUnknown {
			d.sleep(ctx, proposeRetry)
		}
		if (a.Op == OpAwaitTarget || (a.Op == OpUnfence && !a.Redirect)) && !pauseStart.IsZero() && pauseEnd.IsZero() {
			pauseEnd = d.clock.Now()
		}
		a, more = m.Step(o)
	}
	end := d.clock.Now()
	if !x.served.IsZero() && !pauseStart.IsZero() {
		pauseEnd = x.served
	}
	if !pauseStart.IsZero() && pauseEnd.IsZero() {
		pauseEnd = end
	}
	d.mu.Lock()
	if release := d.mu.kept[id]; release != nil && !m.Resume && ctx.Err() == nil {
		release()
		delete(d.mu.kept, id)
	}
	if m.Resume && m.Kind == KindHandover && ctx.Err() == nil {
		// The switch committed, the tail did not reach the target: the
		// group stays fenced here and the handover is settled from its
		// fence record (still on disk) after a wait.
		d.mu.recover[id] = pendingRecovery{at: end.Add(retryMin), wait: retryMin,
			fence: fenceRecord{Group: id, To: m.To, Epoch: m.Epoch, Reason: m.Reason}}
	}
	mig.State, mig.Step, mig.Error = m.State, "", m.Err
	mig.Total, mig.Pause = end.Sub(start), pauseEnd.Sub(pauseStart)
	delete(d.mu.running, id)
	d.mu.recent = append(d.mu.recent, *mig)
	if len(d.mu.recent) > keepRecent {
		d.mu.recent = slices.Delete(d.mu.recent, 0, len(d.mu.recent)-keepRecent)
	}
	if m.State == StateFailed {
		r := d.mu.retry[id]
		if r.decision != mig.Decision {
			r = retryState{decision: mig.Decision, wait: retryMin}
		} else {
			r.wait = min(2*r.wait, retryMax)
		}
		r.at = end.Add(r.wait)
		d.mu.retry[id] = r
	} else {
		// Done: this node's copy of the record may lag the change it
		// made, and list the decision a little longer; it is not
		// carried out again before settleWait.
		d.mu.retry[id] = retryState{decision: mig.Decision, at: end.Add(settleWait), wait: retryMin / 2}
	}
	d.mu.Unlock()
	d.metrics.running.Dec()
	d.metrics.finished.WithLabelValues(string(m.State)).Inc()
	d.metrics.seconds.Observe(mig.Total.Seconds())
	if !pauseStart.IsZero() {
		d.metrics.pause.Observe(mig.Pause.Seconds())
	}
	if m.State == StateDone {
		d.log.Info("migration done", "group", id, "from", m.From, "to", m.To, "total", mig.Total, "pause", mig.Pause)
	} else {
		d.log.Warn("migration failed; the decision stays pending and is tried again", "group", id, "from", m.From, "to", m.To,
			"err", m.Err, "total", mig.Total, "pause", mig.Pause)
	}
}

// withdraw cancels a decision this node cannot carry out.
func (d *Driver) withdraw(ctx context.Context, rec fsm.Group, why string) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	_, err := d.cfg.Meta.Propose(ctx, fsm.CancelGroupDesired(fsm.DesiredCancel{Group: rec.ID, Index: rec.Desired.Index}))
	d.log.Warn("migration: decision withdrawn", "group", rec.ID, "to", rec.Desired.Home, "why", why, "err", err)
}

func (d *Driver) sleep(ctx context.Context, dur time.Duration) {
	t := d.clock.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// Migrations returns the running migrations, then the recent ones, newest
// first.
func (d *Driver) Migrations() []Migration {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Migration, 0, len(d.mu.running)+len(d.mu.recent))
	for _, m := range d.mu.running {
		c := *m
		c.Steps = slices.Clone(m.Steps)
		c.Total = now.Sub(c.Started)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Started.Compare(b.Started) })
	for i := len(d.mu.recent) - 1; i >= 0; i-- {
		out = append(out, d.mu.recent[i])
	}
	return out
}
