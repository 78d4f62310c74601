package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// Errors of history reads; test them with errors.Is.
var (
	// ErrNotSequenced: the topic's policy rule is direct; it has no
	// history.
	ErrNotSequenced = errors.New("delivery: topic is not sequenced")
	// ErrUnknownTopic: nothing was ever published to the topic (its
	// group does not exist, or its log never held the topic).
	ErrUnknownTopic = errors.New("delivery: no message was ever published to the topic")
	// ErrUnavailable: no replica of the topic's group answered.
	ErrUnavailable = errors.New("delivery: no replica of the topic's group answers")
	// ErrCompacted: the index asked for was removed by retention; the
	// error is a *CompactedError with the first index held.
	ErrCompacted = errors.New("delivery: removed by retention")
)

// CompactedError reports a read from an index that retention removed.
type CompactedError struct {
	Topic string
	First uint64 // the first index still held
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("delivery: %s: index removed by retention (the first held is %d)", e.Topic, e.First)
}

// Is makes errors.Is(err, ErrCompacted) hold.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// TopicInfo is what the history knows of a sequenced topic.
type TopicInfo struct {
	Topic string `json:"topic"`
	// Group is the topic's placement group; Rule the policy rule's match
	// it was created under.
	Group string `json:"group"`
	Rule  string `json:"rule"`
	// First and Latest bound the indexes held: [First, Latest]. First is
	// Latest+1 when retention removed every message.
	First  uint64 `json:"first"`
	Latest uint64 `json:"latest"`
	// Retention is the group's: what it keeps.
	Retention fsm.Retention `json:"retention"`
	// Home orders the group; Voters and Learners are its replicas; Epoch
	// counts home changes.
	Home     string    `json:"home"`
	Voters   []string  `json:"voters"`
	Learners []string  `json:"learners,omitempty"`
	Epoch    uint64    `json:"epoch"`
	Created  time.Time `json:"created"`
	// ServedBy is the node whose replica answered.
	ServedBy string `json:"served_by"`
}

// Record is one message of a sequenced topic's history.
type Record struct {
	Index   uint64 // in its topic: the sx-index
	Seq     uint64 // in its group's log
	Retain  bool
	Message *message.Message
}

// Read says where a history read is served.
type Read int

const (
	// ReadAny reads this node's replica of the group if it has one (it may
	// lag the home by what it has not applied yet), else the home's.
	ReadAny Read = iota
	// ReadHome reads the group's home (the leader; another voter while it
	// does not answer).
	ReadHome
)

// History reads sequenced topics' history for the admin API and the CLI:
// a topic's bounds and its messages by index, from a replica of its group.
// Obtain it from Feeds.History; it is safe for concurrent use.
type History struct{ f *Feeds }

// History returns the node's history reader.
func (f *Feeds) History() *History { return &History{f: f} }

// DefaultLimit is the number of messages Messages reads when asked for 0.
const DefaultLimit = 100

// Topic describes a sequenced topic.
func (h *History) Topic(ctx context.Context, topic string, where Read) (TopicInfo, error) {
	info, _, err := h.read(ctx, topic, 0, 0, where)
	return info, err
}

// Messages reads up to limit messages of topic from index from (0: the
// first held); limit 0 is DefaultLimit, at most 10,000. A from below the
// first index held is a *CompactedError (ErrCompacted); past the latest,
// no messages. The topic's info comes with them.
func (h *History) Messages(ctx context.Context, topic string, from uint64, limit int, where Read) ([]Record, TopicInfo, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, maxRangeLimit)
	info, recs, err := h.read(ctx, topic, max(from, 1), limit, where)
	if err != nil {
		return nil, info, err
	}
	if from > 0 && from < info.First {
		return nil, info, &CompactedError{Topic: topic, First: info.First}
	}
	out := make([]Record, 0, len(recs))
	for i := range recs {
		m, err := message.Decode(recs[i].Message)
		if err != nil {
			return nil, info, fmt.Errorf("delivery: %s index %d: %w", topic, recs[i].Index, err)
		}
		out = append(out, Record{Index: recs[i].Index, Seq: recs[i].Seq, Retain: recs[i].Retain, Message: m})
	}
	return out, info, nil
}

// read asks a replica of topic's group for its bounds and records.
func (h *History) read(ctx context.Context, topic string, from uint64, limit int, where Read) (TopicInfo, []record, error) {
	f := h.f
	st := f.cfg.Meta.State()
	gid, _, ok := st.GroupFor(topic)
	if !ok {
		return TopicInfo{}, nil, fmt.Errorf("%w: %s", ErrNotSequenced, topic)
	}
	g, ok := st.Group(gid)
	if !ok {
		return TopicInfo{}, nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	info := TopicInfo{Topic: topic, Group: g.ID, Rule: g.Rule, Retention: g.Retention, Home: g.Home,
		Voters: g.Voters, Learners: g.Learners, Epoch: g.Epoch, Created: g.Created}
	candidates := append([]string{g.Home}, g.Voters...)
	if where == ReadAny && (slices.Contains(g.Voters, f.id) || slices.Contains(g.Learners, f.id)) {
		candidates = append([]string{f.id}, candidates...)
	}
	req := rangeRequest{Group: g.ID, Topic: topic, From: from, Limit: limit}
	var lastErr error
	tried := map[string]bool{}
	for _, node := range candidates {
		if tried[node] {
			continue
		}
		tried[node] = true
		resp, err := f.rangeAt(ctx, node, req)
		if err == nil && resp.Status != statusOK {
			err = fmt.Errorf("no replica of %s on %s", g.ID, node)
		}
		if err != nil {
			lastErr = err
			continue
		}
		info.ServedBy = node
		if !resp.Known {
			return info, nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		info.First, info.Latest = resp.First, resp.Last
		return info, resp.Records, nil
	}
	return info, nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, topic, lastErr)
}

// rangeAt sends a range request to node.
func (f *Feeds) rangeAt(ctx context.Context, node string, req rangeRequest) (rangeResponse, error) {
	return ask(ctx, f, node, MethodRange, req, f.cfg.Server.rangeOf, appendRangeRequest, decodeRangeResponse)
}
