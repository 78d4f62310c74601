package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// methodGroupStats asks a node for the figures of its replicas of some
// placement groups (for GET /v1/groups on another node). The body is JSON
// both ways: it is an operator's request, rare and small next to the
// publish path's.
const methodGroupStats byte = 48

// maxGroupStatsBody bounds a group-stats request or answer.
const maxGroupStatsBody = 16 << 20

type groupStatsRequest struct {
	Groups []string `json:"groups"`
}

type groupStatsResponse struct {
	Stats []adminapi.GroupStats `json:"stats"` // in the order asked; Node "" for a group not held
}

// decodeGroupStatsRequest reads a request body.
func decodeGroupStatsRequest(b []byte) (groupStatsRequest, error) {
	var req groupStatsRequest
	if len(b) > maxGroupStatsBody {
		return req, fmt.Errorf("node: group stats request of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return req, fmt.Errorf("node: group stats request: %w", err)
	}
	return req, nil
}

// decodeGroupStatsResponse reads an answer to a request for want groups.
func decodeGroupStatsResponse(b []byte, want int) (groupStatsResponse, error) {
	var resp groupStatsResponse
	if len(b) > maxGroupStatsBody {
		return resp, fmt.Errorf("node: group stats answer of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return resp, fmt.Errorf("node: group stats answer: %w", err)
	}
	if len(resp.Stats) != want {
		return resp, fmt.Errorf("node: group stats answer: %d groups for %d asked", len(resp.Stats), want)
	}
	return resp, nil
}

// serveGroupStats answers methodGroupStats from this node's replicas.
func (n *Node) serveGroupStats(_ context.Context, _ string, body []byte) ([]byte, error) {
	req, err := decodeGroupStatsRequest(body)
	if err != nil {
		return nil, err
	}
	resp := groupStatsResponse{Stats: make([]adminapi.GroupStats, len(req.Groups))}
	for i, id := range req.Groups {
		resp.Stats[i], _ = n.localGroupStats(id)
	}
	return json.Marshal(resp)
}

// localGroupStats returns the figures of this node's replica of group id.
func (n *Node) localGroupStats(id string) (adminapi.GroupStats, bool) {
	set := n.Groups()
	if set == nil {
		return adminapi.GroupStats{}, false
	}
	r := set.Get(id)
	if r == nil {
		return adminapi.GroupStats{}, false
	}
	rs := r.Rep.Stats()
	ls := r.Seq.Stats().Log
	gs := adminapi.GroupStats{Node: n.cfg.NodeID, Role: string(rs.Role), Leader: rs.Leader.ID, Term: rs.Leader.Term,
		CommitIndex: rs.CommitIndex, AppliedIndex: rs.Applied, LastIndex: rs.LastIndex,
		FirstSeq: ls.FirstSeq, Records: ls.Records, Bytes: ls.Bytes, Segments: ls.Segments, Topics: ls.Topics}
	if ls.NextSeq > 0 {
		gs.LatestSeq = ls.NextSeq - 1
	}
	return gs, true
}

// groupsAPI lists the placement groups for GET /v1/groups.
type groupsAPI struct{ n *Node }

var _ adminapi.Groups = groupsAPI{}

// Groups implements adminapi.Groups: a page of the metadata's groups (in
// id order, after after), with the figures of their homes' replicas (one
// request per home node, in parallel), or this node's replica when the
// home does not answer.
func (g groupsAPI) Groups(ctx context.Context, after string, limit int) ([]adminapi.GroupInfo, bool) {
	n := g.n
	cp := n.cluster
	if cp == nil || cp.meta == nil {
		return nil, false
	}
	if !cp.meta.IsCaughtUp() {
		// Restarted behind: try to bring the copy up to the leader's
		// first (MetaBehind tells the client when that failed).
		bctx, cancel := context.WithTimeout(ctx, metaBarrierTimeout/2)
		_ = cp.meta.ReadBarrier(bctx)
		cancel()
	}
	st := cp.meta.State()
	groups := st.Groups() // sorted by id
	from, _ := slices.BinarySearchFunc(groups, after, func(gr fsm.Group, id string) int { return strings.Compare(gr.ID, id) })
	if from < len(groups) && groups[from].ID == after {
		from++
	}
	groups = groups[from:]
	more := len(groups) > limit
	if more {
		groups = groups[:limit]
	}
	out := make([]adminapi.GroupInfo, len(groups))
	byHome := map[string][]int{} // home -> positions in out
	for i, gr := range groups {
		out[i] = groupInfo(gr)
		if gr.Home != n.cfg.NodeID && cp.layer != nil {
			byHome[gr.Home] = append(byHome[gr.Home], i)
		}
	}
	errs := make(map[int]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for home, idx := range byHome {
		wg.Go(func() {
			req := groupStatsRequest{Groups: make([]string, len(idx))}
			for j, i := range idx {
				req.Groups[j] = out[i].ID
			}
			resp, err := n.askGroupStats(ctx, home, req)
			mu.Lock()
			defer mu.Unlock()
			for j, i := range idx {
				switch {
				case err != nil:
					errs[i] = fmt.Sprintf("home %s did not answer: %v", home, err)
				case resp.Stats[j].Node == "":
					errs[i] = fmt.Sprintf("home %s holds no replica of the group yet", home)
				default:
					s := resp.Stats[j]
					out[i].Stats = &s
				}
			}
		})
	}
	wg.Wait()
	for i := range out {
		if out[i].Stats != nil {
			continue
		}
		if s, ok := n.localGroupStats(out[i].ID); ok {
			out[i].Stats = &s // the home's figures are better; ours are those at hand
		} else if e, ok := errs[i]; ok {
			out[i].StatsError = e
		} else {
			out[i].StatsError = "no replica of the group answered"
		}
	}
	return out, more
}

// MetaBehind implements adminapi.Groups.
func (g groupsAPI) MetaBehind() string {
	cp := g.n.cluster
	if cp == nil || cp.meta == nil || cp.meta.IsCaughtUp() {
		return ""
	}
	return "this node's metadata copy has not caught up with the metadata group's leader since it started (none answered yet): records may be out of date"
}

// askGroupStats asks node for the figures of its replicas.
func (n *Node) askGroupStats(ctx context.Context, node string, req groupStatsRequest) (groupStatsResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return groupStatsResponse{}, err
	}
	ans, err := n.cluster.layer.Peers().Call(ctx, node, methodGroupStats, body)
	if err != nil {
		return groupStatsResponse{}, err
	}
	return decodeGroupStatsResponse(ans, len(req.Groups))
}

func groupInfo(g fsm.Group) adminapi.GroupInfo {
	gi := adminapi.GroupInfo{ID: g.ID, Rule: g.Rule, Home: g.Home, Replicas: g.Voters, Learners: g.Learners,
		Epoch: g.Epoch, Retention: g.Retention, Created: g.Created, HomeReason: string(g.HomeReason), HomeSince: g.HomeSince}
	if gi.Replicas == nil {
		gi.Replicas = []string{}
	}
	return gi
}
