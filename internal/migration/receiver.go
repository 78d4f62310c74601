package migration

import (
	"context"
	"encoding/json"
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
	// Keep holds the replica of a group open (opening it on this node's
	// storage) until release, though the record names another node: a
	// handover's old home reads its log after the switch committed.
	Keep(id string) (release func())
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

// Receiver is the target's side of a handover: it stages the snapshot and
// the tail a group's old home sends and, once the switch naming this node
// home has committed, installs the log where the node's replica set opens
// it, marked installed for the switch's epoch. It also answers the old
// home's questions about this node's replica of a group.
type Receiver struct {
	self   string
	dir    string // the node's groups directory (replicas.Config.Dir)
	groups TargetReplicas
	clock  clock.Clock
	opts   topiclog.Options
	log    *slog.Logger

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
	return &Receiver{self: cfg.NodeID, dir: cfg.Dir, groups: cfg.Groups, clock: cfg.Clock, opts: opts,
		log: cfg.Logger, staged: map[string]*staging{}}
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
	resp, err := rv.serve(ctx, req, from)
	if err == nil && req.Kind == reqAwait && resp.Open && resp.Leader {
		resp.Served, resp.ServedAfter = true, rv.clock.Now().Sub(arrived)
	}
	if err == nil && req.Kind == reqSwitch {
		resp = rv.served(ctx, req.Group, arrived)
		rv.log.Info("migration: serving a handed-over group", "group", req.Group, "epoch", req.Epoch, "serving", resp.Served)
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

// served answers a switch whose log is installed here: once this node
// serves the group (its replica set opened it on the installed log, with
// the record the request brought), saying when.
func (rv *Receiver) served(ctx context.Context, group string, arrived time.Time) response {
	st := rv.await(ctx, group)
	served := st.Open && st.Leader
	return response{OK: true, Next: st.Next, Served: served, ServedAfter: rv.clock.Now().Sub(arrived)}
}

// switchRecord decodes and checks a switch request's record: committed
// (the old home's proposal's answer) naming this node home and only
// voter at the request's epoch, handed over from the sender.
func (rv *Receiver) switchRecord(req request, from string) (fsm.Group, error) {
	var rec fsm.Group
	if err := json.Unmarshal(req.Record, &rec); err != nil {
		return fsm.Group{}, fmt.Errorf("the switch's record does not decode: %w", err)
	}
	switch {
	case rec.ID != req.Group || rec.Home != rv.self || rec.Epoch != req.Epoch || len(rec.Voters) != 1 || rec.Voters[0] != rv.self:
		return fsm.Group{}, fmt.Errorf("the switch's record (group %q, home %q, epoch %d, voters %v) does not hand group %s to this node at epoch %d",
			rec.ID, rec.Home, rec.Epoch, rec.Voters, req.Group, req.Epoch)
	case rec.HandoverFrom != from:
		return fsm.Group{}, fmt.Errorf("the switch's record hands the group over from %q, not from %s", rec.HandoverFrom, from)
	}
	return rec, nil
}

func (rv *Receiver) serve(ctx context.Context, req request, from string) (response, error) {
	switch req.Kind {
	case reqStatus:
		return rv.status(req.Group), nil
	case reqAwait:
		return rv.await(ctx, req.Group), nil
	case reqAbort:
		rv.drop(req.Group, req.ID)
		return response{OK: true}, nil
	}
	var rec fsm.Group
	if req.Kind == reqSwitch {
		var err error
		if rec, err = rv.switchRecord(req, from); err != nil {
			return response{}, err
		}
		if rv.groups.Get(req.Group) != nil && replicas.HandoverMark(rv.dir, req.Group) == req.Epoch {
			// Installed by an earlier request whose answer was lost.
			return response{OK: true}, nil
		}
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
		resp, err = rv.tail(st, req, rec)
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

// tail appends req's records to the staged log; the last request of a
// switch installs the log where the replica set opens the group, marks it
// installed for the switch's epoch (the record names this node home from
// then on, handed over: the replica set opens it on no other log) and
// tells the replica set the committed record rec.
func (rv *Receiver) tail(st *staging, req request, rec fsm.Group) (response, error) {
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
	if req.Kind == reqSwitch && replicas.HandoverMark(rv.dir, req.Group) == req.Epoch {
		// Installed already by an earlier attempt whose answer was lost
		// (the old home was fenced since, so it is the same log), and
		// the replica set may be opening it: it is not replaced.
		rv.dropLocked(req.Group, st)
		rv.groups.Expect(rec)
		return response{OK: true, Next: next}, nil
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
	if req.Kind == reqSwitch {
		if err := replicas.WriteHandoverMark(rv.dir, req.Group, req.Epoch); err != nil {
			return response{}, err
		}
	}
	st.gone = true
	_ = os.RemoveAll(st.dir)
	rv.mu.Lock()
	if rv.staged[req.Group] == st {
		delete(rv.staged, req.Group)
	}
	rv.mu.Unlock()
	if req.Kind == reqSwitch {
		// Serve at once: the replica set opens the group on the record
		// the request brought, without waiting for this node's copy.
		rv.groups.Expect(rec)
	}
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

// Close abandons every staged handover.
func (rv *Receiver) Close() {
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
