package migration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// errNoPeers: the node runs alone.
var errNoPeers = errors.New("no peer links (the node runs alone)")

// exec carries out one migration's actions.
type exec struct {
	d   *Driver
	m   *Machine
	rec fsm.Group
	// next is the position after the snapshot the target was sent: the
	// tail starts there.
	next uint64
	// served is when the target was first seen serving the group (an
	// estimate on this node's clock: see servedAt).
	served time.Time
	// watched: the answer of an await posted to the target when the lead
	// transfer started (the zero time if it did not serve by then).
	watched chan time.Time
	// switched is a handover's committed record (naming the target at the
	// switch's epoch), sent with the tail.
	switched *fsm.Group
	// installed: a recovery found the target serving the group already
	// (it installed an earlier attempt's tail): nothing to send.
	installed bool
}

func failedOutcome(err error) Outcome { return Outcome{Result: ResultFailed, Err: err.Error()} }

// do carries out a and says how it went.
func (x *exec) do(parent context.Context, a Action) Outcome {
	ctx, cancel := context.WithTimeout(parent, stepTimeout)
	defer cancel()
	d, g := x.d, x.m.Group
	switch a.Op {
	case OpFence:
		if err := d.cfg.Home.Fence(ctx, g, a.Node); err != nil {
			// A fence that did not drain is still a fence: the machine
			// lifts it.
			return failedOutcome(err)
		}
		return Outcome{Result: ResultOK}
	case OpUnfence:
		d.cfg.Home.Unfence(g, a.Node, a.Redirect)
		if d.cfg.Dir != "" {
			// Settled: a restart need not fence the group again.
			if err := removeFence(d.cfg.Dir, g); err != nil {
				d.log.Warn("migration: removing a fence record", "group", g, "err", err)
			}
		}
		return Outcome{Result: ResultOK}
	case OpSendSnapshot:
		return x.sendSnapshot(ctx, a.Node)
	case OpSwitch:
		return x.sendTail(ctx, a)
	case OpAbort:
		// Only ever asked when the switch did not commit: the group is
		// this node's, and a restart need not fence it.
		if d.cfg.Dir != "" {
			if err := removeFence(d.cfg.Dir, g); err != nil {
				d.log.Warn("migration: removing a fence record", "group", g, "err", err)
			}
		}
		_, err := x.call(ctx, a.Node, request{Kind: reqAbort, Group: g, ID: x.m.decision()})
		if err != nil {
			return failedOutcome(err)
		}
		return Outcome{Result: ResultOK}
	case OpProposeHome:
		// Proposed without waiting for this node's copy to apply it (a
		// follower learns a commit up to a commit timeout later). With
		// Home this node, a recovery's reclaim.
		c := fsm.HomeChange{Group: g, Home: a.Home, Epoch: a.Epoch, Reason: a.Reason, At: d.clock.Now(), Handover: a.Voters}
		if a.Voters != nil {
			// A handover's switch: once it commits the group is the
			// target's, whose log this node must complete, so a restart
			// must find the group fenced and the handover to resume
			// (fences.go). Recorded before the proposal, outside the
			// pause.
			c.HandoverFrom = d.cfg.NodeID
			if d.cfg.Dir != "" {
				if err := writeFence(d.cfg.Dir, fenceRecord{Group: g, To: a.Home, Epoch: a.Epoch, Reason: a.Reason}); err != nil {
					return failedOutcome(err)
				}
			}
		}
		res, err := d.cfg.Meta.Propose(ctx, fsm.SetGroupHome(c))
		o := proposal(res, err)
		if o.Record != nil && o.Record.Home == x.m.To && o.Record.Home != d.cfg.NodeID && o.Record.Epoch == a.Epoch {
			r := *o.Record
			x.switched = &r // the switch, committed now or before
		}
		if o.Result == ResultOK {
			x.nudge(ctx, *o.Record)
		}
		return o
	case OpProposeMembers:
		res, err := d.cfg.Meta.Propose(ctx, fsm.SetGroupMembers(fsm.MembersChange{Group: g, Epoch: a.Epoch, Voters: a.Voters, Learners: a.Learners}))
		return proposal(res, err)
	case OpTransfer:
		// The target is asked now to answer once it leads: its answer
		// says how long after it arrived that was, which times the
		// pause's end (the old home learns of the transfer when the
		// target's election reaches it, later).
		x.watch(parent, a.Node)
		return x.membership(ctx, a)
	case OpAddLearner, OpPromote, OpRemove:
		return x.membership(ctx, a)
	case OpAwaitCaughtUp:
		r := d.cfg.Replicas.Get(g)
		if r == nil {
			return failedOutcome(errors.New("no replica here"))
		}
		// The last command this replica's state machine applied (the
		// commit index would count configuration entries, which never
		// reach a state machine).
		want := r.Seq.Applied()
		return x.poll(ctx, a.Node, reqStatus, func(resp response) bool { return resp.Open && resp.Applied >= want })
	case OpAwaitTarget:
		// The pause ends when the target serves the group (its replica
		// open and leading); the step when this node's copy of the
		// record names it too (a replicated group's new home claims it
		// once it leads). A switch's answer may have said it serves, or
		// the await posted when the transfer started.
		if x.watched != nil {
			select {
			case at := <-x.watched:
				x.served = at
			case <-ctx.Done():
			}
			x.watched = nil
		}
		if !x.served.IsZero() {
			return x.awaitRecord(ctx, a.Node)
		}
		return x.poll(ctx, a.Node, reqAwait, func(resp response) bool {
			if resp.Open && resp.Leader && x.served.IsZero() {
				x.served = d.clock.Now()
			}
			rec, ok := d.cfg.Meta.State().Group(g)
			return !x.served.IsZero() && ok && rec.Home == a.Node
		})
	}
	return failedOutcome(fmt.Errorf("unknown operation %q", a.Op))
}

func (m *Machine) decision() uint64 {
	if m.Decision == 0 && m.rec.Desired != nil {
		return m.rec.Desired.Index
	}
	return m.Decision
}

// proposal maps a metadata proposal's result.
func proposal(res fsm.Result, err error) Outcome {
	var fe *fsm.Error
	switch {
	case err == nil && res.Group != nil:
		return Outcome{Result: ResultOK, Record: res.Group}
	case err == nil:
		return failedOutcome(errors.New("the metadata leader sent no record"))
	case errors.Is(err, fsm.ErrConflict):
		return Outcome{Result: ResultConflict, Err: err.Error(), Record: res.Group}
	case errors.As(err, &fe):
		return failedOutcome(err)
	}
	// Not refused by the state machine: a timeout, a leader change, a
	// connection lost. The proposal may have committed.
	return Outcome{Result: ResultUnknown, Err: err.Error()}
}

// nudge proposes a change that changes nothing (the record's own members)
// right after the switch. The metadata leader tells followers of a commit
// with its next append, or after its commit timeout when it has nothing to
// append (tens of milliseconds); this append makes the target and the
// access nodes learn the new home one round trip after the switch.
// It runs on its own: the migration does not wait for it.
func (x *exec) nudge(_ context.Context, rec fsm.Group) {
	g := x.d.group.Load()
	if g == nil {
		return
	}
	g.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, stepTimeout)
		defer cancel()
		_, _ = x.d.cfg.Meta.Propose(ctx, fsm.SetGroupMembers(fsm.MembersChange{
			Group: rec.ID, Epoch: rec.Epoch, Voters: rec.Voters, Learners: rec.Learners}))
	})
}

func (x *exec) call(ctx context.Context, node string, req request) (response, error) {
	if x.d.cfg.Peers == nil {
		return response{}, errNoPeers
	}
	body, err := x.d.cfg.Peers.Call(ctx, node, MethodMigrate, appendRequest(nil, req))
	if err != nil {
		return response{}, err
	}
	resp, err := decodeResponse(body)
	if err != nil {
		return response{}, err
	}
	if !resp.OK {
		return resp, fmt.Errorf("%s refused: %s", node, resp.Reason)
	}
	return resp, nil
}

// sendSnapshot copies the group's log to node in chunks.
func (x *exec) sendSnapshot(ctx context.Context, node string) Outcome {
	if x.m.Committed {
		// A recovery: the target may have installed an earlier
		// attempt's tail (its answer was lost) and serve the group.
		if resp, err := x.call(ctx, node, request{Kind: reqStatus, Group: x.m.Group}); err == nil && resp.Open {
			x.installed = true
			return Outcome{Result: ResultOK}
		}
	}
	r := x.d.cfg.Replicas.Get(x.m.Group)
	if r == nil {
		return failedOutcome(errors.New("no replica here"))
	}
	sn, err := r.Seq.LogSnapshot()
	if err != nil {
		return failedOutcome(err)
	}
	defer sn.Release()
	// The stream goes through a pipe, a chunk at a time: a log of many
	// segments is never held in memory whole.
	pr, pw := io.Pipe()
	written := make(chan struct{})
	go func() {
		defer close(written)
		_, err := sn.WriteTo(pw)
		_ = pw.CloseWithError(err)
	}()
	defer func() {
		_ = pr.CloseWithError(errors.New("migration: snapshot send ended"))
		<-written
	}()
	buf := make([]byte, chunkBytes)
	next := make([]byte, 1)
	var off uint64
	have, err := io.ReadFull(pr, buf)
	for {
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return failedOutcome(fmt.Errorf("reading the snapshot: %w", err))
		}
		// The chunk is the last if nothing follows it.
		last := err != nil
		var more int
		if !last {
			more, err = io.ReadFull(pr, next)
			last = more == 0
			if err != nil && !errors.Is(err, io.EOF) {
				return failedOutcome(fmt.Errorf("reading the snapshot: %w", err))
			}
		}
		req := request{Kind: reqChunk, Group: x.m.Group, ID: x.m.decision(), Offset: off, Last: last, Data: buf[:have]}
		resp, cerr := x.call(ctx, node, req)
		if cerr != nil {
			return failedOutcome(cerr)
		}
		off += uint64(have)
		if last {
			if resp.Next != sn.NextSeq() {
				return failedOutcome(fmt.Errorf("the target restored up to position %d, the snapshot to %d", resp.Next, sn.NextSeq()))
			}
			x.next = resp.Next
			return Outcome{Result: ResultOK}
		}
		buf[0] = next[0]
		var n int
		n, err = io.ReadFull(pr, buf[1:])
		have = 1 + n
	}
}

// sendTail sends the records appended since the snapshot; the last
// request (reqSwitch) carries the committed switch and makes the target
// install the log. Its answer says when the target started serving the
// group, which ends the pause (x.served).
func (x *exec) sendTail(ctx context.Context, a Action) Outcome {
	if x.installed {
		x.served = x.d.clock.Now()
		return Outcome{Result: ResultOK}
	}
	if x.switched == nil {
		return failedOutcome(errors.New("no committed switch to hand over"))
	}
	record, err := json.Marshal(x.switched)
	if err != nil {
		return failedOutcome(fmt.Errorf("encoding the switch's record: %w", err))
	}
	r := x.d.cfg.Replicas.Get(x.m.Group)
	if r == nil {
		return failedOutcome(errors.New("no replica here"))
	}
	end := r.Seq.NextSeq()
	from := x.next
	for {
		var recs []topiclog.Record
		if from < end {
			var err error
			if recs, err = r.Seq.ReadRaw(from, 1<<16, tailBytes); err != nil {
				return failedOutcome(err)
			}
		}
		last := len(recs) == 0 || recs[len(recs)-1].Seq+1 >= end
		req := request{Kind: reqTail, Group: x.m.Group, ID: x.m.decision(), Records: recs}
		if last {
			req.Kind, req.Last, req.End, req.Epoch, req.Record = reqSwitch, true, end, a.Epoch, record
		}
		sent := x.d.clock.Now()
		resp, err := x.call(ctx, a.Node, req)
		switch {
		case err != nil && last && resp.Reason == "":
			// No answer: the target may have installed it (a recovery
			// asks it first).
			return Outcome{Result: ResultUnknown, Err: err.Error()}
		case err != nil:
			return failedOutcome(err)
		case !last:
			from = recs[len(recs)-1].Seq + 1
			continue
		}
		if resp.Served {
			x.served = servedAt(sent, x.d.clock.Now(), resp.ServedAfter)
		}
		return Outcome{Result: ResultOK}
	}
}

// servedAt estimates, on this node's clock, when the target started
// serving: the request was sent at sent and answered at got, and the
// target served after it had held it for after (its clock). The network's
// share of the round trip is taken as the same both ways, so the
// estimate needs no common clock; with the same delay each way it is
// exact.
func servedAt(sent, got time.Time, after time.Duration) time.Time {
	rtt := got.Sub(sent)
	if after < 0 || after > rtt {
		return got // clocks that disagree: no better than the answer's arrival
	}
	return sent.Add((rtt-after)/2 + after)
}

// watch posts an await to node, answered once it serves the group (or
// after awaitMax); x.watched gets when it started serving, by servedAt.
func (x *exec) watch(ctx context.Context, node string) {
	ch := make(chan time.Time, 1)
	x.watched = ch
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 2*awaitMax)
		defer cancel()
		sent := x.d.clock.Now()
		resp, err := x.call(ctx, node, request{Kind: reqAwait, Group: x.m.Group})
		var at time.Time
		if err == nil && resp.Served {
			at = servedAt(sent, x.d.clock.Now(), resp.ServedAfter)
		}
		ch <- at
	}()
}

// awaitRecord waits until this node's copy of the record names node home.
func (x *exec) awaitRecord(ctx context.Context, node string) Outcome {
	for {
		ch := x.d.cfg.Meta.Changed()
		if rec, ok := x.d.cfg.Meta.State().Group(x.m.Group); ok && rec.Home == node {
			return Outcome{Result: ResultOK}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return failedOutcome(fmt.Errorf("waiting for the record to name %s: %w", node, ctx.Err()))
		}
	}
}

// poll asks node about its replica until done says so.
func (x *exec) poll(ctx context.Context, node string, kind byte, done func(response) bool) Outcome {
	t := x.d.clock.NewTimer(pollEvery)
	defer t.Stop()
	for {
		resp, err := x.call(ctx, node, request{Kind: kind, Group: x.m.Group})
		if err == nil && done(resp) {
			return Outcome{Result: ResultOK}
		}
		t.Reset(pollEvery)
		select {
		case <-t.C():
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return failedOutcome(fmt.Errorf("waiting for %s: %w", node, err))
		}
	}
}

// membership changes the group's Raft configuration (this node leads it).
func (x *exec) membership(ctx context.Context, a Action) Outcome {
	r := x.d.cfg.Replicas.Get(x.m.Group)
	if r == nil {
		return failedOutcome(errors.New("no replica here"))
	}
	rg, ok := r.Rep.(*replication.Group[sequencer.Result])
	if !ok {
		return failedOutcome(errors.New("the group has one replica: no membership to change"))
	}
	var err error
	switch a.Op {
	case OpAddLearner:
		n, ok := x.d.cfg.Meta.State().Node(a.Node)
		if !ok || n.Labels.PeerAddr == "" {
			return failedOutcome(fmt.Errorf("node %s has no cluster address in the registry", a.Node))
		}
		err = rg.AddLearner(ctx, a.Node, n.Labels.PeerAddr)
	case OpPromote:
		err = rg.Promote(ctx, a.Node)
	case OpRemove:
		err = rg.Remove(ctx, a.Node)
	case OpTransfer:
		err = rg.TransferLeadership(ctx, a.Node)
	}
	if err != nil {
		return failedOutcome(err)
	}
	return Outcome{Result: ResultOK}
}
