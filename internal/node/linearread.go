package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// Linearizable history reads (the admin API's read=linearizable, its
// default). The read runs on the group's leader after a Raft barrier
// (replication.Group.Barrier: an entry of its own committed by a majority,
// every earlier one applied), so it sees every record acknowledged before
// it began, and a leader deposed by a partition it has not noticed yet
// cannot answer. A group with one replica needs no barrier: its publishes
// are acknowledged after they are applied on its only replica. The node
// that takes the HTTP request asks the leader over the peer link
// (methodLinearRead), following not-leader hints.

// methodLinearRead asks a node to read a topic's records from its replica
// of the topic's group, as the group's leader, after a barrier. JSON both
// ways, as methodGroupStats (an operator's or a checker's read).
const methodLinearRead byte = 49

// Bounds of a linearizable read.
const (
	linearBarrierTimeout = 2 * time.Second
	// linearCallTimeout bounds one node's answer, so that a node cut off
	// does not use up the whole read's time before the others are asked.
	linearCallTimeout = linearBarrierTimeout + time.Second
	linearReadBytes   = 4 << 20
	linearRetryMin    = 20 * time.Millisecond
	linearRetryMax    = 200 * time.Millisecond
)

// Statuses of a linearizable read's answer.
const (
	linearOK        = "ok"
	linearNoReplica = "no_replica"
	linearNotLeader = "not_leader"
	linearFailed    = "failed"
)

type linearReadRequest struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	From  uint64 `json:"from"`  // 0: the first held
	Limit int    `json:"limit"` // 0: bounds only
	// Latest reads from the latest index (From is ignored).
	Latest bool `json:"latest,omitempty"`
}

type linearReadResponse struct {
	Status string `json:"status"`
	Leader string `json:"leader,omitempty"` // with not_leader: the leader the replica knows of
	Error  string `json:"error,omitempty"`
	// Known: the topic has a log in the group; First and Last bound its
	// indexes. Compacted: From is below First.
	Known     bool                 `json:"known"`
	First     uint64               `json:"first"`
	Last      uint64               `json:"last"`
	Compacted bool                 `json:"compacted,omitempty"`
	Records   []adminapi.LogRecord `json:"records,omitempty"`
}

func decodeLinearReadRequest(b []byte) (linearReadRequest, error) {
	var req linearReadRequest
	if len(b) > maxGroupStatsBody {
		return req, fmt.Errorf("node: linear read request of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return req, fmt.Errorf("node: linear read request: %w", err)
	}
	if req.Limit < 0 || req.Limit > adminapi.MaxLogLimit {
		return req, fmt.Errorf("node: linear read request: limit %d", req.Limit)
	}
	return req, nil
}

func decodeLinearReadResponse(b []byte) (linearReadResponse, error) {
	var resp linearReadResponse
	if len(b) > 2*linearReadBytes+maxGroupStatsBody {
		return resp, fmt.Errorf("node: linear read answer of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return resp, fmt.Errorf("node: linear read answer: %w", err)
	}
	switch resp.Status {
	case linearOK, linearNoReplica, linearNotLeader, linearFailed:
	default:
		return resp, fmt.Errorf("node: linear read answer: status %q", resp.Status)
	}
	return resp, nil
}

// serveLinearRead answers methodLinearRead.
func (n *Node) serveLinearRead(ctx context.Context, _ string, body []byte) ([]byte, error) {
	req, err := decodeLinearReadRequest(body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(n.linearRead(ctx, req))
}

// barrier is what a replicated group's replica offers for linearizable
// reads (*replication.Group).
type barrier interface {
	Barrier(ctx context.Context) error
}

// linearRead reads from this node's replica of req.Group if it leads the
// group, after a barrier.
func (n *Node) linearRead(ctx context.Context, req linearReadRequest) linearReadResponse {
	set := n.Groups()
	if set == nil {
		return linearReadResponse{Status: linearNoReplica}
	}
	r := set.Get(req.Group)
	if r == nil {
		return linearReadResponse{Status: linearNoReplica}
	}
	if !r.Rep.IsLeader() {
		return linearReadResponse{Status: linearNotLeader, Leader: r.Rep.Leader().ID}
	}
	if b, ok := r.Rep.(barrier); ok {
		bctx, cancel := context.WithTimeout(ctx, linearBarrierTimeout)
		err := b.Barrier(bctx)
		cancel()
		var nl *replication.NotLeaderError
		switch {
		case errors.As(err, &nl):
			return linearReadResponse{Status: linearNotLeader, Leader: nl.Leader.ID}
		case err != nil:
			return linearReadResponse{Status: linearFailed, Error: err.Error()}
		}
	}
	first, last, ok := r.Seq.Bounds(req.Topic)
	resp := linearReadResponse{Status: linearOK, Known: ok, First: first, Last: last}
	if !ok || req.Limit == 0 {
		return resp
	}
	from := req.From
	if from == 0 {
		from = first
	}
	if req.Latest {
		from = max(last, first)
	}
	if from < first {
		resp.Compacted = true
		return resp
	}
	if from > last {
		return resp
	}
	recs, err := r.Seq.Range(req.Topic, from, req.Limit, linearReadBytes)
	var ce *topiclog.CompactedError
	switch {
	case errors.As(err, &ce): // retention ran after Bounds
		resp.First, resp.Compacted = ce.First, true
		return resp
	case err != nil:
		return linearReadResponse{Status: linearFailed, Error: err.Error()}
	}
	for _, rec := range recs {
		m, err := message.Decode(rec.Message)
		if err != nil {
			return linearReadResponse{Status: linearFailed, Error: fmt.Sprintf("%s index %d: %v", req.Topic, rec.Index, err)}
		}
		resp.Records = append(resp.Records, logRecord(rec.Index, rec.Seq, rec.Retain, m))
	}
	return resp
}

// askLinearRead sends req to node (a direct call for this node).
func (n *Node) askLinearRead(ctx context.Context, node string, req linearReadRequest) (linearReadResponse, error) {
	if node == n.cfg.NodeID {
		return n.linearRead(ctx, req), nil
	}
	cp := n.cluster
	if cp == nil || cp.layer == nil {
		return linearReadResponse{}, fmt.Errorf("no link to %s: this node runs alone", node)
	}
	// A link that is down now fails at once (the read asks the next
	// replica, and this one again at its next round) rather than wait for
	// it to come back: after a home's death its replicas still name it as
	// leader for a moment.
	if l := cp.layer.Peers().Link(node); l == nil || !l.Up() {
		return linearReadResponse{}, fmt.Errorf("no connected link to %s", node)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return linearReadResponse{}, err
	}
	ans, err := cp.layer.Peers().Call(ctx, node, methodLinearRead, body)
	if err != nil {
		return linearReadResponse{}, err
	}
	return decodeLinearReadResponse(ans)
}

// readLinear reads topic's bounds and, with limit > 0, its records from
// from, at the leader of its group: this node's replica and the home
// first, then whichever node the replicas name as leader, then the other
// voters, again and again (with a back-off) until one answers or ctx ends.
func (n *Node) readLinear(ctx context.Context, topic string, from uint64, limit int) (adminapi.TopicLog, []adminapi.LogRecord, error) {
	return n.readLinearReq(ctx, linearReadRequest{Topic: topic, From: from, Limit: limit})
}

// readLinearReq is readLinear for a request whose group is filled in
// here.
func (n *Node) readLinearReq(ctx context.Context, req linearReadRequest) (adminapi.TopicLog, []adminapi.LogRecord, error) {
	topic := req.Topic
	cp := n.cluster
	if cp == nil || cp.meta == nil {
		return adminapi.TopicLog{}, nil, fmt.Errorf("%w: the node is not serving yet", adminapi.ErrUnavailable)
	}
	wait := linearRetryMin
	var lastErr error
	synced := false
	for {
		st := cp.meta.State()
		gid, _, sequenced := st.GroupFor(topic)
		g, known := st.Group(gid)
		if (!sequenced || !known) && !synced {
			// This node's copy of the metadata may lag: a rule or a group
			// created elsewhere, and already used by an acknowledged
			// publish, may not have reached it. Catch up with the
			// metadata leader before answering that there is none.
			if err := n.syncMeta(ctx); err != nil {
				return adminapi.TopicLog{}, nil, fmt.Errorf("%w: the metadata leader could not be asked whether %s has a log: %v", adminapi.ErrUnavailable, topic, err)
			}
			synced = true
			continue
		}
		if !sequenced {
			return adminapi.TopicLog{}, nil, fmt.Errorf("%w: %s", adminapi.ErrNotSequenced, topic)
		}
		if !known {
			return adminapi.TopicLog{}, nil, fmt.Errorf("%w: %s", adminapi.ErrUnknownTopic, topic)
		}
		req.Group = g.ID
		// This node's own replica, if any, answers at once with the leader
		// it knows of: fresher than the record's home during a failover.
		queue := append([]string{g.Home}, g.Voters...)
		if slices.Contains(g.Voters, n.cfg.NodeID) || slices.Contains(g.Learners, n.cfg.NodeID) {
			queue = append([]string{n.cfg.NodeID}, queue...)
		}
		tried := map[string]bool{}
		for len(queue) > 0 {
			node := queue[0]
			queue = queue[1:]
			if tried[node] {
				continue
			}
			tried[node] = true
			cctx, cancel := context.WithTimeout(ctx, linearCallTimeout)
			resp, err := n.askLinearRead(cctx, node, req)
			cancel()
			if err == nil {
				switch resp.Status {
				case linearOK:
					return linearAnswer(g, topic, node, resp)
				case linearNotLeader:
					if resp.Leader != "" && !tried[resp.Leader] {
						queue = append([]string{resp.Leader}, queue...)
					}
					err = fmt.Errorf("%s does not lead the group (leader: %q)", node, resp.Leader)
				case linearNoReplica:
					err = fmt.Errorf("%s holds no replica of the group", node)
				default:
					err = fmt.Errorf("%s: %s", node, resp.Error)
				}
			}
			lastErr = err
		}
		t := n.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return adminapi.TopicLog{}, nil, fmt.Errorf("%w (last: %v)", adminapi.ErrUnavailable, lastErr)
		case <-t.C():
		}
		wait = min(2*wait, linearRetryMax)
	}
}

// linearAnswer turns a leader's answer into the API's.
func linearAnswer(g fsm.Group, topic, node string, resp linearReadResponse) (adminapi.TopicLog, []adminapi.LogRecord, error) {
	tl := adminapi.TopicLog{Topic: topic, Group: g.ID, Rule: g.Rule, First: resp.First, Latest: resp.Last,
		Retention: g.Retention, Home: g.Home, Replicas: slices.Clone(g.Voters), Learners: g.Learners, Epoch: g.Epoch,
		Created: g.Created, ServedBy: node}
	if tl.Replicas == nil {
		tl.Replicas = []string{}
	}
	if resp.Last >= resp.First && resp.First > 0 {
		tl.Count = resp.Last - resp.First + 1
	}
	switch {
	case !resp.Known:
		return tl, nil, fmt.Errorf("%w: %s", adminapi.ErrUnknownTopic, topic)
	case resp.Compacted:
		return tl, nil, &adminapi.CompactedError{Topic: topic, First: resp.First}
	}
	return tl, resp.Records, nil
}

// ReadLinearizable is the admin API's linearizable history read, for
// in-process tests and checkers: topic's bounds and, with limit > 0 (at
// most adminapi.MaxLogLimit), its records from index from (0: the first
// held), read at the group's leader after a barrier. Errors wrap
// adminapi.ErrNotSequenced, ErrUnknownTopic, ErrUnavailable, or are an
// *adminapi.CompactedError.
func (n *Node) ReadLinearizable(ctx context.Context, topic string, from uint64, limit int) (adminapi.TopicLog, []adminapi.LogRecord, error) {
	return n.readLinear(ctx, topic, from, min(max(limit, 0), adminapi.MaxLogLimit))
}

// methodMetaApplied asks a node, as the metadata group's leader, for the
// index its copy of the metadata has applied (JSON answer). Still served
// for nodes of an earlier version; this one asks the metadata group's
// read index instead (syncMeta).
const methodMetaApplied byte = 50

type metaAppliedResponse struct {
	Leader  bool   `json:"leader"`
	Applied uint64 `json:"applied"`
}

// serveMetaApplied answers methodMetaApplied.
func (n *Node) serveMetaApplied(context.Context, string, []byte) ([]byte, error) {
	m := n.cluster.meta
	return json.Marshal(metaAppliedResponse{Leader: m.IsLeader(), Applied: m.State().Applied()})
}

// metaBarrierTimeout bounds bringing this node's metadata copy up to the
// leader's before an operator's lookup answers from it.
const metaBarrierTimeout = 5 * time.Second

// syncMeta waits until this node's copy of the metadata has applied the
// metadata leader's read index (meta.ReadBarrier: after a barrier, so a
// leader deposed without knowing it cannot answer): every change
// acknowledged before.
func (n *Node) syncMeta(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, linearCallTimeout)
	defer cancel()
	return n.cluster.meta.ReadBarrier(ctx)
}
