package replicas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/atomicfile"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/run"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/sequencer/replica"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("replicas: invalid config")

// Meta is what the set needs of the metadata group (*meta.Meta).
type Meta interface {
	// State is this node's copy of the metadata.
	State() fsm.State
	// Changed is closed at the next change of State.
	Changed() <-chan struct{}
	// CaughtUp is closed once State has caught up with the group since
	// this node started (meta.Meta.CaughtUp): before, the copy may still
	// name this node the home or a replica of a group that moved away
	// while it was down.
	CaughtUp() <-chan struct{}
	// SetGroupHome records a new home for a group.
	SetGroupHome(ctx context.Context, c fsm.HomeChange) (fsm.Group, error)
}

// Defaults.
const (
	// DefaultRetentionInterval is how often a group's leader applies its
	// retention bounds.
	DefaultRetentionInterval = time.Minute
	// retryOpen is how long the watcher waits before opening again a
	// group that failed to open (the budget was full, a peer address was
	// not known yet).
	retryOpen = 2 * time.Second
	// claimTimeout bounds the hand over of a new group's lead (one claim
	// attempt: claimAttempt, keeper.go); claimRetry is the wait after a
	// claim failed for another reason than a newer record.
	claimTimeout = 10 * time.Second
	claimRetry   = 500 * time.Millisecond
	// proposeTimeout bounds a retention tick.
	proposeTimeout = 30 * time.Second
	// openTimeout bounds opening and bootstrapping one group.
	openTimeout = 30 * time.Second
)

// Config configures a Set.
type Config struct {
	// NodeID is this node's id in the metadata and in every group.
	NodeID string
	// Addr is this node's cluster address (the leader address a Single
	// reports); may be empty for a node running alone.
	Addr string
	Meta Meta
	// Engine runs the replicated groups (nil: a node running alone, which
	// opens groups with one voter only).
	Engine *replication.Engine
	// Dir is where groups keep their storage: the engine's data dir.
	Dir string
	// Sync makes every topic-log batch of a group with one voter durable
	// before its publishes are acknowledged (the node's fsync=always).
	// Replicated groups never sync their topic log: their Raft log is the
	// durable record.
	Sync bool
	// RetentionInterval is how often each group's leader proposes a
	// retention tick (default DefaultRetentionInterval).
	RetentionInterval time.Duration
	// SegmentBytes is the size of topic-log segments (0: the topic log's
	// default, 16 MiB). Retention deletes whole sealed segments.
	SegmentBytes int64
	// RecentBytes bounds each group's newest records kept in memory
	// (sequencer.Options.RecentBytes: 0 its default, negative none).
	RecentBytes int
	// MaxGroups bounds the replicas open on this node, with one voter or
	// several (0: no bound here; the engine has its own for Raft groups).
	MaxGroups  int
	Clock      clock.Clock
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Replica is this node's replica of one group.
type Replica struct {
	// ID is the group's id.
	ID string
	// Seq is the group's state machine: reads of its log.
	Seq *sequencer.Sequencer
	// Rep orders commands: Submit and Propose on the leader.
	Rep replication.Replica[sequencer.Result]

	cancel context.CancelFunc
	done   chan struct{} // closed when the keeper returned
	// noHandOver: the keeper will not hand the lead to the group's home
	// (HandingOver): the home has led the group, or the hand over failed.
	noHandOver atomic.Bool
}

// Set is this node's replicas, following the metadata group. See the
// package comment.
type Set struct {
	// immutable after New
	cfg     Config
	log     *slog.Logger
	clock   clock.Clock
	group   *run.Group
	metrics *metrics

	kick chan struct{} // Expect: reconcile now

	mu struct {
		sync.Mutex
		open    map[string]*Replica
		changed chan struct{} // closed and replaced at every append or open/close
		closed  bool
		// ahead: records known committed (Expect) that the metadata copy
		// does not show yet, by group; dropped once it does.
		ahead map[string]fsm.Group
		// kept: groups kept open here although the record names other
		// nodes (Keep), with how many holds each.
		kept map[string]int
	}
}

// New returns a set; Start begins following the metadata group.
func New(cfg Config) (*Set, error) {
	switch {
	case cfg.NodeID == "":
		return nil, fmt.Errorf("%w: no node id", ErrConfig)
	case cfg.Meta == nil:
		return nil, fmt.Errorf("%w: no metadata group", ErrConfig)
	case cfg.Dir == "":
		return nil, fmt.Errorf("%w: no directory", ErrConfig)
	case cfg.RetentionInterval < 0:
		return nil, fmt.Errorf("%w: negative retention interval", ErrConfig)
	}
	if cfg.RetentionInterval == 0 {
		cfg.RetentionInterval = DefaultRetentionInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Set{cfg: cfg, log: cfg.Log, clock: cfg.Clock, group: run.NewGroup(context.Background()), metrics: newMetrics(cfg.Registerer),
		kick: make(chan struct{}, 1)}
	s.mu.open = map[string]*Replica{}
	s.mu.ahead = map[string]fsm.Group{}
	s.mu.kept = map[string]int{}
	s.mu.changed = make(chan struct{})
	if cfg.Registerer != nil {
		_ = cfg.Registerer.Register(newLogCollector(s)) // a second set on one registry keeps the first one's
	}
	return s, nil
}

// replicas returns the replicas open here.
func (s *Set) replicas() []*Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Replica, 0, len(s.mu.open))
	for _, r := range s.mu.open {
		out = append(out, r)
	}
	return out
}

// Start begins following the metadata group.
func (s *Set) Start() { s.group.Go(s.watch) }

// Close stops following the metadata group and closes every replica.
func (s *Set) Close() error {
	s.group.Stop()
	s.group.Wait()
	s.mu.Lock()
	s.mu.closed = true
	open := s.mu.open
	s.mu.open = map[string]*Replica{}
	close(s.mu.changed)
	s.mu.Unlock()
	var errs []error
	for _, r := range open {
		errs = append(errs, s.shut(r))
	}
	return errors.Join(errs...)
}

// Get returns this node's replica of group id, or nil if it runs none.
func (s *Set) Get(id string) *Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.open[id]
}

// Await returns this node's replica of group id, waiting for it to open
// for up to max while this node's metadata copy names the node one of the
// group's voters or learners, or has no record of the group yet (a copy
// that lags the record a peer just created; a record Expect was told of
// counts ahead of the copy). It returns nil once the
// record names other nodes only, at max, when ctx ends or the set closes.
// Until the metadata copy caught up (Meta.CaughtUp) its record is not
// trusted either way and Await waits (the set opens nothing before).
// The publish path's home side waits so: a new group's first publishes
// may come before this node's watcher opened its replica.
func (s *Set) Await(ctx context.Context, id string, max time.Duration) *Replica {
	var timer clock.Timer
	for {
		s.mu.Lock()
		r, closed, changed := s.mu.open[id], s.mu.closed, s.mu.changed
		s.mu.Unlock()
		if r != nil || closed {
			return r
		}
		metaCh := s.cfg.Meta.Changed()
		ready := s.cfg.Meta.CaughtUp()
		select {
		case <-ready:
			ready = nil // caught up: the record counts, and a nil channel never fires
			if g, ok := s.record(id); ok &&
				!slices.Contains(g.Voters, s.cfg.NodeID) && !slices.Contains(g.Learners, s.cfg.NodeID) {
				return nil
			}
		default:
		}
		if timer == nil {
			if max <= 0 {
				return nil
			}
			timer = s.clock.NewTimer(max)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-metaCh:
		case <-ready:
		case <-timer.C():
			return s.Get(id)
		case <-ctx.Done():
			return nil
		}
	}
}

// IDs returns the groups open here, sorted.
func (s *Set) IDs() []string {
	s.mu.Lock()
	ids := make([]string, 0, len(s.mu.open))
	for id := range s.mu.open {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// Changed returns a channel closed at the next append to any group open
// here, or when a group opens or closes. Take it before reading, so a
// change between the read and the wait is not missed.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.changed
}

func (s *Set) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// Expect tells the set that rec, a record naming this node the only voter
// and home of a group, has committed, before this node's metadata copy
// shows it: a handover's target is sent the committed switch with the
// tail, often before its copy learns it (a follower learns a commit with
// the leader's next append). The set opens the group
// at once, as if its copy had rec, and reads rec rather than its copy's
// older record until the copy reaches rec's epoch. Other records are
// ignored.
func (s *Set) Expect(rec fsm.Group) {
	if rec.Home != s.cfg.NodeID || len(rec.Voters) != 1 || rec.Voters[0] != s.cfg.NodeID || len(rec.Learners) != 0 {
		return
	}
	rec.Voters, rec.Learners = []string{s.cfg.NodeID}, nil
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.mu.ahead[rec.ID] = rec
	s.mu.Unlock()
	s.kickNow()
}

// Keep keeps this node's replica of group id open (opening it on the
// storage here if it is not) until release is called, whatever the record
// says: a handover's old home reads its log to hand it over after the
// switch that names the target has committed (internal/migration). The
// group is opened with this node its only voter; its keeper claims
// nothing while the record does not name this node a voter, and the
// publish path's fence keeps its publishes out once the handover fenced
// it. Holds count: the replica closes after the last release (if the
// record does not name this node).
func (s *Set) Keep(id string) (release func()) {
	s.mu.Lock()
	s.mu.kept[id]++
	s.mu.Unlock()
	s.kickNow()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.mu.kept[id]--; s.mu.kept[id] <= 0 {
				delete(s.mu.kept, id)
			}
			s.mu.Unlock()
			s.kickNow()
		})
	}
}

func (s *Set) kickNow() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// record is group id's record: the metadata copy's, or a newer one given
// to Expect.
func (s *Set) record(id string) (fsm.Group, bool) {
	g, ok := s.cfg.Meta.State().Group(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ahead := s.mu.ahead[id]; ahead && ok && g.Epoch < a.Epoch {
		return a, true
	}
	return g, ok
}

// watch opens and closes replicas as the metadata changes, once the
// metadata copy caught up: a node restarted with a copy behind the group
// would otherwise open a group that moved away while it was down (its
// copy still naming it home) and take publishes for it beside the real
// home.
func (s *Set) watch(ctx context.Context) {
	select {
	case <-s.cfg.Meta.CaughtUp():
	default:
		s.log.Info("placement group replicas wait for this node's metadata copy to catch up")
		select {
		case <-s.cfg.Meta.CaughtUp():
		case <-ctx.Done():
			return
		}
	}
	retry := s.clock.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		ch := s.cfg.Meta.Changed()
		if failed := s.reconcile(ctx, s.cfg.Meta.State()); failed {
			retry.Reset(retryOpen)
		}
		select {
		case <-ch:
		case <-s.kick:
		case <-retry.C():
		case <-ctx.Done():
			return
		}
	}
}

// reconcile opens the groups st names this node a replica of and closes
// the others; it reports whether a group failed to open.
func (s *Set) reconcile(ctx context.Context, st fsm.State) (failed bool) {
	want := map[string]fsm.Group{}
	for _, g := range st.Groups() {
		if slices.Contains(g.Voters, s.cfg.NodeID) || slices.Contains(g.Learners, s.cfg.NodeID) {
			want[g.ID] = g
		}
	}
	s.mu.Lock()
	for id, a := range s.mu.ahead {
		if g, ok := st.Group(id); !ok || g.Epoch >= a.Epoch {
			delete(s.mu.ahead, id) // the copy caught up (or the group is gone)
		} else {
			want[id] = a
		}
	}
	for id, g := range want {
		if !s.handedOverHere(g) {
			// Named home by a handover whose log is not installed here
			// yet: the storage here (none, or a copy of an older time)
			// is not the group's log. The install kicks the set.
			delete(want, id)
		}
	}
	for id := range s.mu.kept {
		if _, ok := want[id]; !ok {
			g, _ := st.Group(id)
			if g.ID == "" {
				g.ID = id
			}
			g.Voters, g.Learners = []string{s.cfg.NodeID}, nil
			want[id] = g
		}
	}
	var stale []*Replica
	for id, r := range s.mu.open {
		if _, ok := want[id]; !ok {
			stale = append(stale, r)
			delete(s.mu.open, id)
		}
	}
	var missing []fsm.Group
	for id, g := range want {
		if _, ok := s.mu.open[id]; !ok {
			missing = append(missing, g)
		}
	}
	s.mu.Unlock()
	for _, r := range stale {
		_, exists := st.Group(r.ID)
		s.log.Info("closing a placement group replica", "group", r.ID, "deleted", !exists)
		if err := s.shut(r); err != nil {
			s.log.Warn("closing a placement group replica", "group", r.ID, "err", err)
		}
		if !exists {
			s.remove(r.ID)
		}
	}
	slices.SortFunc(missing, func(a, b fsm.Group) int { return strings.Compare(a.ID, b.ID) })
	for _, g := range missing {
		if ctx.Err() != nil {
			return false
		}
		r, err := s.open(ctx, st, g)
		if err != nil {
			s.metrics.openFailures.Inc()
			s.log.Warn("opening a placement group replica failed", "group", g.ID, "err", err)
			failed = true
			continue
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			_ = s.shut(r)
			return false
		}
		s.mu.open[g.ID] = r
		s.mu.Unlock()
		s.startKeeper(r)
		s.log.Info("opened a placement group replica", "group", g.ID, "voters", g.Voters, "learners", g.Learners)
	}
	s.metrics.open.Set(float64(len(s.IDs())))
	if len(stale) > 0 || len(missing) > 0 {
		s.notify()
	}
	return failed
}

// groupDir is where group id keeps its storage.
func (s *Set) groupDir(id string) string {
	return filepath.Join(s.cfg.Dir, replication.GroupID(id).DirName())
}

// open opens this node's replica of g: its sequencer, then a Single (one
// voter) or a Raft group, bootstrapped with the record's voters when this
// node is one of them.
func (s *Set) open(ctx context.Context, st fsm.State, g fsm.Group) (*Replica, error) {
	if n := len(s.IDs()); s.cfg.MaxGroups > 0 && n >= s.cfg.MaxGroups {
		return nil, fmt.Errorf("%w: %d groups open (max-groups)", replication.ErrBudget, n)
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	single := len(g.Voters) == 1 && len(g.Learners) == 0
	if !single && s.cfg.Engine == nil {
		return nil, fmt.Errorf("replicas: group %s has %d voters and this node runs no replication engine", g.ID, len(g.Voters))
	}
	opts := sequencer.Options{RecentBytes: s.cfg.RecentBytes, Log: topiclog.Options{
		SegmentBytes: s.cfg.SegmentBytes, SegmentAge: segmentAge(g.Retention), Sync: topiclog.SyncNone,
		Logger: s.log.With("group", g.ID),
	}}
	if single {
		opts.BatchEntries = true
		if s.cfg.Sync {
			opts.Log.Sync = topiclog.SyncAlways
		}
	}
	seq, err := sequencer.Open(topiclog.OSFS{}, filepath.Join(s.groupDir(g.ID), "log"), opts)
	if err != nil {
		return nil, err
	}
	machine := &notifying{FSM: replica.New(seq), seq: seq, applied: s.metrics.appliedRecords, notify: s.notify}
	r := &Replica{ID: g.ID, Seq: seq}
	if single {
		r.Rep, err = replication.NewSingle[sequencer.Result](replication.GroupID(g.ID), machine,
			replication.SingleConfig{NodeID: s.cfg.NodeID, Addr: s.cfg.Addr, Clock: s.clock})
		if err != nil {
			_ = seq.Close()
			return nil, err
		}
		return r, nil
	}
	rg, err := replication.OpenGroup[sequencer.Result](ctx, s.cfg.Engine, replication.GroupID(g.ID), machine)
	if err != nil {
		_ = seq.Close()
		return nil, err
	}
	r.Rep = rg
	if slices.Contains(g.Voters, s.cfg.NodeID) {
		members := make([]replication.Member, 0, len(g.Voters))
		for _, v := range g.Voters {
			n, ok := st.Node(v)
			if !ok || n.Labels.PeerAddr == "" {
				_ = rg.Close()
				_ = seq.Close()
				return nil, fmt.Errorf("replicas: group %s: voter %s has no cluster address in the registry", g.ID, v)
			}
			members = append(members, replication.Member{ID: v, Addr: n.Labels.PeerAddr, Voter: true})
		}
		if err := rg.Bootstrap(ctx, members); err != nil && !errors.Is(err, replication.ErrBootstrapped) {
			_ = rg.Close()
			_ = seq.Close()
			return nil, err
		}
	}
	return r, nil
}

// segmentAge seals a group's segments often enough for its age bound to
// delete old records (retention removes whole sealed segments): an eighth
// of the bound, so records outlive it by at most that much.
func segmentAge(r fsm.Retention) time.Duration {
	if r.Duration <= 0 {
		return 0
	}
	return max(time.Duration(r.Duration)/8, time.Second)
}

// shut stops r's keeper and closes its replica and sequencer.
func (s *Set) shut(r *Replica) error {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	err := r.Rep.Close()
	if cerr := r.Seq.Close(); cerr != nil && !errors.Is(cerr, sequencer.ErrClosed) {
		err = errors.Join(err, cerr)
	}
	return err
}

// remove deletes the storage of a group whose record was deleted.
func (s *Set) remove(id string) {
	var err error
	if s.cfg.Engine != nil {
		err = s.cfg.Engine.Delete(replication.GroupID(id))
	} else {
		err = os.RemoveAll(s.groupDir(id))
	}
	if err != nil {
		s.log.Warn("removing a deleted group's storage", "group", id, "err", err)
	}
}

// notifying tells the set after every batch the group applied, and counts
// the records it appended.
type notifying struct {
	*replica.FSM
	seq     *sequencer.Sequencer
	applied prometheus.Counter
	notify  func()
}

var _ replication.FSM[sequencer.Result] = (*notifying)(nil)

func (n *notifying) Apply(entries []replication.Entry) ([]sequencer.Result, error) {
	before := n.seq.NextSeq()
	res, err := n.FSM.Apply(entries)
	if after := n.seq.NextSeq(); after > before {
		n.applied.Add(float64(after - before))
	}
	n.notify()
	return res, err
}

func (n *notifying) Restore(r io.Reader) error {
	err := n.FSM.Restore(r)
	n.notify()
	return err
}

// handoverMark is the file beside a handed-over group's log that says for
// which epoch of the record the log was installed.
const handoverMark = "handover"

// WriteHandoverMark records, durably, that the log in dir's storage of
// group id is the one handed over for the record's epoch: a record naming
// this node home by a handover (fsm.Group.HandoverFrom) at that epoch may
// open it. Written by the handover's receiver once the log is in place.
func WriteHandoverMark(dir, id string, epoch uint64) error {
	p := filepath.Join(dir, replication.GroupID(id).DirName(), handoverMark)
	if err := atomicfile.Write(p, []byte(strconv.FormatUint(epoch, 10)+"\n"), 0o640); err != nil {
		return fmt.Errorf("replicas: handover mark of %s: %w", id, err)
	}
	return nil
}

// HandoverMark is the epoch group id's storage in dir was handed over for
// (0: none, or unreadable).
func HandoverMark(dir, id string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, replication.GroupID(id).DirName(), handoverMark))
	if err != nil {
		return 0
	}
	e, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return e
}

// handedOverHere reports whether g may be opened here as far as a
// handover is concerned: it does not name this node home by a handover,
// or the handed-over log is installed for its epoch, or the replica is
// open already. s.mu is held.
func (s *Set) handedOverHere(g fsm.Group) bool {
	if g.HandoverFrom == "" || g.HandoverFrom == s.cfg.NodeID || g.Home != s.cfg.NodeID {
		return true
	}
	if _, open := s.mu.open[g.ID]; open {
		return true
	}
	return HandoverMark(s.cfg.Dir, g.ID) == g.Epoch
}
