package delivery

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/topic"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// Replicas is this node's group replicas as the server reads them
// (*replicas.Set).
type Replicas interface {
	Get(id string) *replicas.Replica
	// Changed is closed at the next append to any group open here.
	Changed() <-chan struct{}
}

var _ Replicas = (*replicas.Set)(nil)

// Read limits.
const (
	// defaultPollBytes bounds the records of one poll response.
	defaultPollBytes = 1 << 20
	// maxGroupRecords bounds the records of one group in a response.
	maxGroupRecords = 4096
)

// Server answers polls for the records of the groups this node
// replicates: the source side of feeds, replays and history reads. Every
// replica holds only committed records, in the group's one order, so any
// replica may serve them; feeds ask the group's home first.
type Server struct {
	// immutable after NewServer
	groups Replicas
	clock  clock.Clock

	mu struct {
		sync.Mutex
		polls map[string]*pollSlot // by polling node: its newest poll
	}
}

// pollSlot is the newest poll of one node; a newer poll ends it.
type pollSlot struct {
	poll     uint64
	replaced chan struct{}
}

// NewServer returns the server over this node's replicas.
func NewServer(groups Replicas, clk clock.Clock) *Server {
	if clk == nil {
		clk = clock.Real{}
	}
	s := &Server{groups: groups, clock: clk}
	s.mu.polls = map[string]*pollSlot{}
	return s
}

// Serve answers a MethodPoll request from node.
func (s *Server) Serve(ctx context.Context, node string, body []byte) ([]byte, error) {
	req, err := decodePollRequest(body)
	if err != nil {
		return nil, err
	}
	resp := s.poll(ctx, node, req)
	return appendPollResponse(make([]byte, 0, resp.sizeHint()), resp), nil
}

// poll answers at once if some group has records (or news: a position
// resolved, records lost, no replica here), else waits up to req.Wait for
// records, until ctx ends or a newer poll of node replaces it.
func (s *Server) poll(ctx context.Context, node string, req pollRequest) pollResponse {
	var replaced <-chan struct{}
	if req.Wait > 0 {
		replaced = s.register(node, req.Poll)
		defer s.unregister(node, req.Poll)
	}
	var t clock.Timer
	for {
		changed := s.groups.Changed()
		resp, news := s.read(req)
		if news || req.Wait <= 0 {
			return resp
		}
		if t == nil {
			t = s.clock.NewTimer(req.Wait)
			defer t.Stop()
		}
		select {
		case <-changed:
			continue
		case <-t.C():
		case <-replaced:
		case <-ctx.Done():
		}
		return resp
	}
}

// register records node's poll as its newest and returns a channel closed
// when a newer one arrives.
func (s *Server) register(node string, poll uint64) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.mu.polls[node]; old != nil {
		if old.poll > poll {
			ch := make(chan struct{})
			close(ch) // an older poll arriving late: answer at once
			return ch
		}
		close(old.replaced)
	}
	slot := &pollSlot{poll: poll, replaced: make(chan struct{})}
	s.mu.polls[node] = slot
	return slot.replaced
}

func (s *Server) unregister(node string, poll uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot := s.mu.polls[node]; slot != nil && slot.poll == poll {
		delete(s.mu.polls, node)
	}
}

// read reads each group's records from where the request asks; news
// reports whether there is anything to answer with.
func (s *Server) read(req pollRequest) (resp pollResponse, news bool) {
	budget := req.MaxBytes
	if budget <= 0 || budget > defaultPollBytes {
		budget = defaultPollBytes
	}
	for _, g := range req.Groups {
		gr := s.readGroup(g, max(budget, 1))
		// Records skipped by the filters still move the position on.
		if gr.Status != statusOK || gr.Next > gr.From || gr.First > 0 || g.From == 0 {
			news = true
		}
		for _, r := range gr.Records {
			budget -= len(r.Message) + len(r.Topic) + 16
		}
		resp.Groups = append(resp.Groups, gr)
	}
	return resp, news
}

// readGroup reads one group's matching records from g.From, within
// budget bytes (at least one record).
func (s *Server) readGroup(g pollGroup, budget int) groupRecords {
	out := groupRecords{Group: g.Group}
	r := s.groups.Get(g.Group)
	if r == nil {
		out.Status = statusNoReplica
		return out
	}
	from := g.From
	if from == 0 {
		from = seek(r.Seq, g.Since)
	}
	out.From, out.Next = from, from
	for attempt := 0; attempt < 3; attempt++ {
		start := out.Next
		if first := r.Seq.FirstSeq(); start < first {
			out.First, start = first, first
		}
		recs, err := r.Seq.ReadSeq(start, maxGroupRecords, budget)
		var ce *topiclog.CompactedError
		switch {
		case errors.As(err, &ce):
			continue // retention ran between FirstSeq and the read
		case err != nil:
			out.Status = statusNoReplica
			return out
		}
		out.Next = start
		if len(recs) == 0 {
			return out
		}
		out.Next = recs[len(recs)-1].Seq + 1
		// The records of a read mostly share their topic: match each run
		// of one topic once, and size the answer before filling it.
		m := matcher{filters: g.Filters}
		n := 0
		for i := range recs {
			if m.wanted(recs[i].Topic) {
				n++
			}
		}
		if n == 0 {
			return out
		}
		out.Records = make([]record, 0, n)
		for i := range recs {
			if m.wanted(recs[i].Topic) {
				out.Records = append(out.Records, recordOf(&recs[i]))
			}
		}
		return out
	}
	out.Next = out.First
	return out
}

// matcher is wanted with the last topic's answer remembered.
type matcher struct {
	filters []string
	last    string
	ok, set bool
}

func (m *matcher) wanted(name string) bool {
	if !m.set || name != m.last {
		m.last, m.ok, m.set = name, wanted(m.filters, name), true
	}
	return m.ok
}

func wanted(filters []string, name string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if topic.Match(f, name) {
			return true
		}
	}
	return false
}

// seek returns the first position holding a record at or after since
// (Unix ns; 0: the end of the log), by binary search over the record
// times (the leader's, which grow with the position except across a
// leader change between clocks that disagree).
func seek(s *sequencer.Sequencer, since int64) uint64 {
	lo, hi := s.FirstSeq(), s.NextSeq()
	if since == 0 {
		return hi
	}
	at := time.Unix(0, since)
	for lo < hi {
		mid := lo + (hi-lo)/2
		recs, err := s.ReadSeq(mid, 1, 0)
		if err != nil || len(recs) == 0 {
			return lo // retention moved the start; begin at the first held
		}
		if recs[0].Time.Before(at) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// ServeSeek answers a MethodSeek request.
func (s *Server) ServeSeek(_ context.Context, _ string, body []byte) ([]byte, error) {
	req, err := decodeSeekRequest(body)
	if err != nil {
		return nil, err
	}
	return appendSeekResponse(nil, s.seek(req)), nil
}

// seek resolves where a replay for req's filter and sx-from starts, and
// reads the latest retained records of the topics the filter matches.
func (s *Server) seek(req seekRequest) seekResponse {
	r := s.groups.Get(req.Group)
	if r == nil {
		return seekResponse{Status: statusNoReplica}
	}
	sq := r.Seq
	literal := !strings.ContainsAny(req.Filter, "+#")
	topics := func() []string {
		if literal {
			return []string{req.Filter}
		}
		var out []string
		for _, t := range sq.Topics() {
			if topic.Match(req.Filter, t) {
				out = append(out, t)
			}
		}
		return out
	}
	resp := seekResponse{Start: sq.NextSeq()}
	switch req.Kind {
	case seekEarliest:
		resp.Start = sq.FirstSeq()
	case seekIndex:
		resp.Floor = req.Index
		if !literal {
			resp.Start = sq.FirstSeq()
			break
		}
		first, last, ok := sq.Bounds(req.Filter)
		if !ok || req.Index > last || first > last {
			break // nothing from that index yet: from the next record on
		}
		at := max(req.Index, first)
		resp.Lost = at - req.Index
		if rec, err := sq.Get(req.Filter, at); err == nil {
			resp.Start = rec.Seq
		}
	case seekLatest:
		for _, t := range topics() {
			rec, err := sq.Latest(t)
			if err != nil {
				continue
			}
			resp.Start = min(resp.Start, rec.Seq)
			resp.Floors = append(resp.Floors, topicFloor{Topic: t, Index: rec.Index})
		}
	}
	if req.Retained {
		for _, t := range topics() {
			rec, err := sq.LatestRetained(t)
			if err != nil {
				continue
			}
			if m, err := message.Decode(rec.Message); err != nil || len(m.Payload) == 0 {
				continue // an empty retained message deletes the retained one
			}
			resp.Retained = append(resp.Retained, recordOf(&rec))
		}
	}
	return resp
}

// ServeRange answers a MethodRange request.
func (s *Server) ServeRange(_ context.Context, _ string, body []byte) ([]byte, error) {
	req, err := decodeRangeRequest(body)
	if err != nil {
		return nil, err
	}
	return appendRangeResponse(nil, s.rangeOf(req)), nil
}

// rangeOf reads a topic's bounds and records from an index.
func (s *Server) rangeOf(req rangeRequest) rangeResponse {
	r := s.groups.Get(req.Group)
	if r == nil {
		return rangeResponse{Status: statusNoReplica}
	}
	first, last, ok := r.Seq.Bounds(req.Topic)
	resp := rangeResponse{Known: ok, First: first, Last: last}
	if !ok || req.Limit == 0 || first > last {
		return resp
	}
	from := max(req.From, first)
	recs, err := r.Seq.Range(req.Topic, from, min(req.Limit, maxRangeLimit), defaultPollBytes)
	var ce *topiclog.CompactedError
	switch {
	case errors.As(err, &ce):
		resp.First = ce.First // retention ran after Bounds
		if recs, err = r.Seq.Range(req.Topic, ce.First, min(req.Limit, maxRangeLimit), defaultPollBytes); err != nil {
			return rangeResponse{Status: statusNoReplica}
		}
	case err != nil:
		return rangeResponse{Status: statusNoReplica}
	}
	for i := range recs {
		resp.Records = append(resp.Records, recordOf(&recs[i]))
	}
	return resp
}

// recordOf is a sequencer record as the wire carries it.
func recordOf(rec *sequencer.Record) record {
	return record{Seq: rec.Seq, Index: rec.Index, Retain: rec.Retain, QoS: rec.QoS, Topic: rec.Topic, Message: rec.Message}
}
