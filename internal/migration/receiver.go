package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// Replicas is this node's group replicas as the migration needs them
// (*replicas.Set).
type Replicas interface {
	Get(id string) *replicas.Replica
}

var _ Replicas = (*replicas.Set)(nil)

// TargetReplicas is the replica set as the receiving side needs it
// (*replicas.Set): Expect opens a group whose switch committed before the
// node's metadata copy shows it.
type TargetReplicas interface {
	Replicas
	Expect(rec fsm.Group)
}

var _ TargetReplicas = (*replicas.Set)(nil)

// Waiting for a group to be served here (reqAwait).
const (
	awaitMax  = time.Second
	awaitPoll = time.Millisecond
)

// switchTimeout bounds the target's switch: its proposal, made again
// while its outcome is unknown (the epoch precondition makes repeats
// safe). The old home, whose call may end first, settles the outcome with
// its own proposal at the same epoch (see Machine).
const switchTimeout = 10 * time.Second

// Receiver is the target's side of a handover: it stages the snapshot and
// the tail a group's old home sends, installs the log where the node's
// replica set opens it, and proposes the switch that names this node home.
// It also answers the old home's questions about this node's replica of a
// group.
type Receiver struct {
	self   string
	dir    string // the node's groups directory (replicas.Config.Dir)
	groups TargetReplicas
	meta   Meta
	clock  clock.Clock
	opts   topiclog.Options
	log    *slog.Logger

	// nudges: the proposals made after a switch, not waited for (see
	// nudge); Close ends and waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	nudges sync.WaitGroup

	mu     sync.Mutex
	staged map[string]*staging
}

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	NodeID string
	// Dir is the node's groups directory (replicas.Config.Dir); Groups
	// the replica set that opens groups there.
	Dir    string
	Groups TargetReplicas
	// Meta takes the switch's proposal (nil: a switch is refused).
	Meta Meta
	// Log is the topic-log options the replica set opens a group of one
	// replica with (segment size).
	Log    topiclog.Options
	Clock  clock.Clock
	Logger *slog.Logger
}

// staging is one group's handover in progress here.
type staging struct {
	mu   sync.Mutex
	id   uint64
	dir  string
	snap *os.File
	size uint64
	log  *topiclog.Log // the restored log, once the snapshot is whole
	gone bool          // aborted or installed
}

// NewReceiver returns the receiving side of handovers.
func NewReceiver(cfg ReceiverConfig) *Receiver {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	opts := cfg.Log
	opts.Sync = topiclog.SyncNone // Close syncs; the install is after it
	ctx, cancel := context.WithCancel(context.Background())
	return &Receiver{self: cfg.NodeID, dir: cfg.Dir, groups: cfg.Groups, meta: cfg.Meta, clock: cfg.Clock, opts: opts,
		log: cfg.Logger, ctx: ctx, cancel: cancel, staged: map[string]*staging{}}
}

// groupDir is where the replica set keeps group id (replicas.Set).
func (rv *Receiver) groupDir(id string) string {
	return filepath.Join(rv.dir, replication.GroupID(id).DirName())
}

// Serve answers a MethodMigrate request.
func (rv *Receiver) Serve(ctx context.Context, from string, body []byte) ([]byte, error) {
	arrived := rv.clock.Now()
	req, err := decodeRequest(body)
	if err != nil {
		return nil, err
	}
	resp, err := rv.serve(ctx, req)
	if err == nil && req.Kind == reqAwait && resp.Open && resp.Leader {
		resp.Served, resp.ServedAfter = true, rv.clock.Now().Sub(arrived)
	}
	if err == nil && req.Kind == reqSwitch {
		resp, err = rv.switchHome(ctx, req, arrived)
		if errors.Is(err, errSwitchUnknown) {
			// Not an answer: the old home learns the outcome from the
			// record (its own proposal at the same epoch).
			rv.log.Warn("migration: the switch's outcome is unknown", "group", req.Group, "from", from, "err", err)
			return nil, err
		}
	}
	if err != nil {
		rv.log.Warn("migration: refused a handover request", "group", req.Group, "from", from, "err", err)
		resp = response{Reason: err.Error()}
	}
	return appendResponse(nil, resp), nil
}

// status is this node's replica of group: cheap reads only (no call into
// Raft's loop, which is busy while the lead moves).
func (rv *Receiver) status(group string) response {
	r := rv.groups.Get(group)
	if r == nil {
		return response{OK: true}
	}
	return response{OK: true, Open: true, Leader: r.Rep.IsLeader(), Applied: r.Seq.Applied(), Next: r.Seq.NextSeq()}
}

// await answers once this node serves group (its replica open and
// leading), or after awaitMax: the old home learns it half a round trip
// after it happens, where polling would take a whole one.
func (rv *Receiver) await(ctx context.Context, group string) response {
	t := rv.clock.NewTimer(awaitPoll)
	defer t.Stop()
	deadline := rv.clock.Now().Add(awaitMax)
	for {
		resp := rv.status(group)
		if (resp.Open && resp.Leader) || !rv.clock.Now().Before(deadline) {
			return resp
		}
		t.Reset(awaitPoll)
		select {
		case <-t.C():
		case <-ctx.Done():
			return resp
		}
	}
}

// errSwitchUnknown: the switch may or may not have committed.
var errSwitchUnknown = errors.New("migration: the switch's outcome is unknown")

// switchHome proposes the switch once the handed-over log is installed:
// set_group_home with the request's epoch (the group's + 1), this node
// home and only voter. The old home proposed nothing: it waits, fenced,
// for this answer, or settles the outcome itself with a proposal at the
// same epoch if the answer does not come, so that exactly one of the two
// commits. On a commit this node answers once it serves the group (its
// replica set opened it on the installed log), saying when.
func (rv *Receiver) switchHome(ctx context.Context, req request, arrived time.Time) (response, error) {
	if rv.meta == nil {
		return response{}, errors.New("this node takes no metadata proposals")
	}
	if req.Epoch < 2 || req.Reason == "" {
		return response{}, fmt.Errorf("a switch to epoch %d, reason %q", req.Epoch, req.Reason)
	}
	ctx, cancel := context.WithTimeout(ctx, switchTimeout)
	defer cancel()
	c := fsm.HomeChange{Group: req.Group, Home: rv.self, Epoch: req.Epoch, Reason: fsm.Reason(req.Reason),
		At: rv.clock.Now(), Handover: []string{rv.self}}
	var rec fsm.Group
	for {
		res, err := rv.meta.Propose(ctx, fsm.SetGroupHome(c))
		var fe *fsm.Error
		if err == nil && res.Group != nil {
			rec = *res.Group
			break
		}
		if errors.Is(err, fsm.ErrConflict) && res.Group != nil && res.Group.Home == rv.self && res.Group.Epoch == req.Epoch {
			rec = *res.Group // an earlier attempt committed
			break
		}
		if err != nil && errors.As(err, &fe) {
			// Refused by the state machine (the record moved on: the old
			// home gave up first): this node does not take the group.
			return response{}, fmt.Errorf("the switch was refused: %w", err)
		}
		t := rv.clock.NewTimer(proposeRetry)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return response{}, fmt.Errorf("%w: %w", errSwitchUnknown, err)
		}
	}
	// Serve at once: the replica set opens the group on the record the
	// answer brought, without waiting for this node's copy to learn it.
	rv.groups.Expect(rec)
	rv.nudge(rec)
	st := rv.await(ctx, req.Group)
	served := st.Open && st.Leader
	rv.log.Info("migration: switched a handed-over group to this node", "group", req.Group, "epoch", rec.Epoch, "serving", served)
	return response{OK: true, Next: st.Next, Served: served, ServedAfter: rv.clock.Now().Sub(arrived)}, nil
}

// nudge proposes a change that changes nothing (the record's own members)
// right after the switch. The metadata leader tells followers of a commit
// with its next append, or after its commit timeout when it has nothing to
// append (tens of milliseconds); this append makes the access nodes (and
// this node's copy, which opens the group) learn the new home one round
// trip after the switch. It is not waited for.
func (rv *Receiver) nudge(rec fsm.Group) {
	rv.nudges.Add(1)
	go func() {
		defer rv.nudges.Done()
		ctx, cancel := context.WithTimeout(rv.ctx, stepTimeout)
		defer cancel()
		_, _ = rv.meta.Propose(ctx, fsm.SetGroupMembers(fsm.MembersChange{
			Group: rec.ID, Epoch: rec.Epoch, Voters: rec.Voters, Learners: rec.Learners}))
	}()
}

func (rv *Receiver) serve(ctx context.Context, req request) (response, error) {
	switch req.Kind {
	case reqStatus:
		return rv.status(req.Group), nil
	case reqAwait:
		return rv.await(ctx, req.Group), nil
	case reqAbort:
		rv.drop(req.Group, req.ID)
		return response{OK: true}, nil
	}
	if rv.groups.Get(req.Group) != nil {
		return response{}, fmt.Errorf("this node runs a replica of group %s already", req.Group)
	}
	st, err := rv.stage(req)
	if err != nil {
		return response{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone || st.id != req.ID {
		return response{}, fmt.Errorf("handover %d of group %s is not the one staged", req.ID, req.Group)
	}
	var resp response
	if req.Kind == reqChunk {
		resp, err = rv.chunk(st, req)
	} else if req.Kind == reqSwitch && !req.Last {
		err = errors.New("a switch request is the tail's last")
	} else {
		resp, err = rv.tail(st, req)
	}
	if err != nil {
		rv.dropLocked(req.Group, st)
	}
	return resp, err
}

// stage returns the group's staging for req: a new one for a snapshot's
// first chunk (replacing any older handover of the group).
func (rv *Receiver) stage(req request) (*staging, error) {
	rv.mu.Lock()
	old := rv.staged[req.Group]
	if req.Kind == reqChunk && req.Offset == 0 {
		st := &staging{id: req.ID, dir: rv.groupDir(req.Group) + ".handover"}
		rv.staged[req.Group] = st
		rv.mu.Unlock()
		if old != nil {
			old.mu.Lock()
			old.close()
			old.mu.Unlock()
		}
		if err := os.RemoveAll(st.dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(st.dir, 0o750); err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(st.dir, "snapshot"))
		if err != nil {
			return nil, err
		}
		st.snap = f
		return st, nil
	}
	rv.mu.Unlock()
	if old == nil {
		return nil, fmt.Errorf("no handover of group %s staged", req.Group)
	}
	return old, nil
}

func (rv *Receiver) chunk(st *staging, req request) (response, error) {
	if st.snap == nil || req.Offset != st.size {
		return response{}, fmt.Errorf("snapshot chunk at offset %d, staged %d bytes", req.Offset, st.size)
	}
	if _, err := st.snap.Write(req.Data); err != nil {
		return response{}, err
	}
	st.size += uint64(len(req.Data))
	if !req.Last {
		return response{OK: true}, nil
	}
	if _, err := st.snap.Seek(0, 0); err != nil {
		return response{}, err
	}
	l, err := topiclog.Open(topiclog.OSFS{}, filepath.Join(st.dir, "log"), rv.opts)
	if err != nil {
		return response{}, err
	}
	st.log = l
	if err := l.Restore(st.snap); err != nil {
		return response{}, err
	}
	_ = st.snap.Close()
	st.snap = nil
	_ = os.Remove(filepath.Join(st.dir, "snapshot"))
	return response{OK: true, Next: l.NextSeq()}, nil
}

func (rv *Receiver) tail(st *staging, req request) (response, error) {
	if st.log == nil {
		return response{}, errors.New("tail before the whole snapshot")
	}
	if err := appendRaw(st.log, req.Records); err != nil {
		return response{}, err
	}
	next := st.log.NextSeq()
	if !req.Last {
		return response{OK: true, Next: next}, nil
	}
	if req.Kind == reqSwitch && next != req.End {
		// Not installed, not switched: the old home's log ends elsewhere.
		return response{}, fmt.Errorf("the handed-over log ends at position %d, the old home's at %d", next, req.End)
	}
	// Install: the log goes where the replica set will open it when the
	// record names this node.
	err := st.log.Close()
	st.log = nil
	if err != nil {
		return response{}, err
	}
	gd := rv.groupDir(req.Group)
	if err := os.RemoveAll(gd); err != nil {
		return response{}, err
	}
	if err := os.MkdirAll(gd, 0o750); err != nil {
		return response{}, err
	}
	if err := os.Rename(filepath.Join(st.dir, "log"), filepath.Join(gd, "log")); err != nil {
		return response{}, err
	}
	st.gone = true
	_ = os.RemoveAll(st.dir)
	rv.mu.Lock()
	if rv.staged[req.Group] == st {
		delete(rv.staged, req.Group)
	}
	rv.mu.Unlock()
	rv.log.Info("migration: installed a handed-over group log", "group", req.Group, "next", next)
	return response{OK: true, Next: next}, nil
}

// drop abandons group's handover id (any, when id is 0).
func (rv *Receiver) drop(group string, id uint64) {
	rv.mu.Lock()
	st := rv.staged[group]
	if st == nil || (id != 0 && st.id != id) {
		rv.mu.Unlock()
		return
	}
	delete(rv.staged, group)
	rv.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.close()
}

func (rv *Receiver) dropLocked(group string, st *staging) {
	rv.mu.Lock()
	if rv.staged[group] == st {
		delete(rv.staged, group)
	}
	rv.mu.Unlock()
	st.close()
}

// close releases st's files and removes its directory; st.mu is held.
func (st *staging) close() {
	if st.gone {
		return
	}
	st.gone = true
	if st.snap != nil {
		_ = st.snap.Close()
	}
	if st.log != nil {
		_ = st.log.Close()
	}
	_ = os.RemoveAll(st.dir)
}

// Close abandons every staged handover and ends the nudges.
func (rv *Receiver) Close() {
	rv.cancel()
	rv.nudges.Wait()
	rv.mu.Lock()
	staged := rv.staged
	rv.staged = map[string]*staging{}
	rv.mu.Unlock()
	for _, st := range staged {
		st.mu.Lock()
		st.close()
		st.mu.Unlock()
	}
}
