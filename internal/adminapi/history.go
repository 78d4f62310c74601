package adminapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/topic"
)

// The history endpoints read a sequenced topic's log:
//
//	GET /v1/topics/{topic}                          the topic's log: bounds, group, home, replicas
//	GET /v1/topics/{topic}/messages?from=&limit=    its records by index
//
// {topic} is the topic name percent-encoded as ONE path segment: every
// '/' of the topic is written %2F (Go's url.PathEscape, JavaScript's
// encodeURIComponent), so sensors/t1 is /v1/topics/sensors%2Ft1. An
// unencoded slash is refused with a 400 that says so: with it, a topic
// whose last level is "messages" could not be told from the messages
// endpoint. These paths are routed before the mux (HistoryPrefix), which
// would otherwise clean the decoded path and redirect topics with empty
// levels ("a//b", "/a", "a/").

// HistoryPrefix is the path prefix of the history endpoints.
const HistoryPrefix = "/v1/topics/"

// Limits of the messages endpoint's limit parameter.
const (
	DefaultLogLimit = 100
	MaxLogLimit     = 1000
)

// Errors a History returns; the API maps them to statuses. Wrap them with
// %w.
var (
	// ErrNotSequenced: the topic's policy rule is not sequenced (409).
	ErrNotSequenced = errors.New("not a sequenced topic")
	// ErrUnknownTopic: the topic has no log: nothing was ever published
	// to it (404).
	ErrUnknownTopic = errors.New("no message was ever published to the topic")
	// ErrUnavailable: no replica of the topic's group answered (503).
	ErrUnavailable = errors.New("no replica of the topic's group answers")
)

// CompactedError is a read from an index retention removed (410).
type CompactedError struct {
	Topic string
	First uint64 // the first index still held
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("%s: index removed by retention; the first index held is %d", e.Topic, e.First)
}

// TopicLog is GET /v1/topics/{topic}: a sequenced topic's log.
type TopicLog struct {
	Topic string `json:"topic"`
	// Group is the topic's placement group; Rule the policy rule's match
	// the group was created under.
	Group string `json:"group"`
	Rule  string `json:"rule"`
	// First and Latest bound the indexes held: [First, Latest]; First is
	// Latest+1 when retention removed every record. Count is how many
	// are held.
	First  uint64 `json:"first"`
	Latest uint64 `json:"latest"`
	Count  uint64 `json:"count"`
	// Retention is what the group's log keeps.
	Retention fsm.Retention `json:"retention"`
	// Home orders the group's records; Replicas are its voters (the home
	// among them), Learners replicas being added; Epoch counts home
	// changes.
	Home     string    `json:"home"`
	Replicas []string  `json:"replicas"`
	Learners []string  `json:"learners,omitempty"`
	Epoch    uint64    `json:"epoch"`
	Created  time.Time `json:"created"`
	// ServedBy is the node whose replica answered.
	ServedBy string `json:"served_by"`
}

// LogRecord is one record of a sequenced topic. The payload is given as
// text when it is valid UTF-8, else in base64 (payload_base64).
type LogRecord struct {
	Index uint64 `json:"index"` // in the topic: the sx-index subscribers see
	Seq   uint64 `json:"seq"`   // in the group's log
	// QoS is the QoS the record was published with; Retain its retain
	// flag.
	QoS             byte           `json:"qos"`
	Retain          bool           `json:"retain"`
	Bytes           int            `json:"bytes"`
	Payload         string         `json:"payload,omitempty"`
	PayloadBase64   string         `json:"payload_base64,omitempty"`
	PayloadFormat   byte           `json:"payload_format,omitempty"`
	ContentType     string         `json:"content_type,omitempty"`
	ResponseTopic   string         `json:"response_topic,omitempty"`
	CorrelationData []byte         `json:"correlation_data,omitempty"` // base64 in JSON
	UserProperties  []UserProperty `json:"user_properties,omitempty"`
	Expiry          *time.Time     `json:"expiry,omitempty"`
	Publisher       string         `json:"publisher,omitempty"`
	// Time is when the publisher's access node received the message.
	Time time.Time `json:"time"`
}

// UserProperty is an MQTT 5 user property.
type UserProperty struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// SetPayload fills Payload (valid UTF-8) or PayloadBase64, and Bytes.
func (r *LogRecord) SetPayload(p []byte) {
	r.Bytes = len(p)
	if utf8.Valid(p) {
		r.Payload = string(p)
	} else {
		r.PayloadBase64 = base64.StdEncoding.EncodeToString(p)
	}
}

// LogPage is GET /v1/topics/{topic}/messages: records of the topic from
// index From, with the log's bounds at the time of the read.
type LogPage struct {
	TopicLog
	// From is the first index asked for (earliest and latest resolved).
	From uint64 `json:"from"`
	// Next is the index to ask for next: after the last record given, or
	// From when there was none.
	Next     uint64      `json:"next"`
	Messages []LogRecord `json:"messages"`
}

// Where says which replica serves a history read.
type Where int

const (
	// ReadLinearizable reads at the group's leader after a Raft barrier:
	// it sees every record acknowledged before the read began, or fails
	// (503) while the group has no leader that a majority follows.
	ReadLinearizable Where = iota
	// ReadHome reads the replica of the group's home as this node's
	// metadata names it (another voter while it does not answer), without
	// a barrier: it answers while the group has no majority, but a home
	// deposed by a partition, or another voter, may lag.
	ReadHome
	// ReadLocal reads this node's replica when it has one (it may lag the
	// home by what it has not applied yet), else the home's.
	ReadLocal
)

// History reads sequenced topics' logs, from this node's replica of their
// group or from another node's. Errors wrap ErrNotSequenced,
// ErrUnknownTopic, ErrUnavailable or are a *CompactedError.
type History interface {
	TopicLog(ctx context.Context, topic string, where Where) (TopicLog, error)
	// LogRecords reads up to limit records of topic from index from (0:
	// the first held); a from past the latest gives none, one below the
	// first held a *CompactedError.
	LogRecords(ctx context.Context, topic string, from uint64, limit int, where Where) ([]LogRecord, TopicLog, error)
}

// LatestReader is what a History may offer to read a topic's latest
// records in one read (from=latest); without it ReadLog asks for the
// bounds, then the records.
type LatestReader interface {
	// LatestRecords reads the latest record of topic (none when
	// retention removed every one), with the log's bounds.
	LatestRecords(ctx context.Context, topic string, where Where) ([]LogRecord, TopicLog, error)
}

// historyTimeout bounds one history read, remote ones included.
const historyTimeout = 10 * time.Second

// WithHistory adds GET /v1/topics/{topic} and
// GET /v1/topics/{topic}/messages (see HistoryPrefix).
func (s *Server) WithHistory(h History) *Server {
	s.history = h
	return s
}

// LogRequest is a parsed history request.
type LogRequest struct {
	Topic    string
	Messages bool // the messages endpoint
	// From is the index to read from; FromEarliest and FromLatest replace
	// it with the first or the latest index held.
	From         uint64
	FromEarliest bool
	FromLatest   bool
	Limit        int
	Where        Where
}

// requestError is a bad request: its code and message.
type requestError struct{ code, msg string }

func (e *requestError) Error() string { return e.msg }

func badRequest(code, format string, a ...any) error {
	return &requestError{code: code, msg: fmt.Sprintf(format, a...)}
}

// ParseLogPath reads the topic, and whether the messages endpoint is
// asked for, from an escaped request path under HistoryPrefix.
func ParseLogPath(escaped string) (LogRequest, error) {
	rest, ok := strings.CutPrefix(escaped, HistoryPrefix)
	if !ok || rest == "" {
		return LogRequest{}, badRequest("bad_topic", "want /v1/topics/{topic} or /v1/topics/{topic}/messages")
	}
	var req LogRequest
	seg, suffix, more := strings.Cut(rest, "/")
	if more {
		if suffix != "messages" {
			// Show the path the client probably meant.
			meant, ends := strings.CutSuffix(rest, "/messages")
			example := HistoryPrefix + url.PathEscape(unescapeOr(meant))
			if ends {
				example += "/messages"
			}
			return LogRequest{}, badRequest("bad_topic",
				"the topic must be one path segment with its '/' written %%2F: %s", example)
		}
		req.Messages = true
	}
	name, err := url.PathUnescape(seg)
	if err != nil {
		return LogRequest{}, badRequest("bad_topic", "topic: bad percent-encoding: %v", err)
	}
	if err := topic.ValidateName(name); err != nil {
		return LogRequest{}, badRequest("bad_topic", "topic %q: %v", name, err)
	}
	req.Topic = name
	return req, nil
}

// unescapeOr unescapes s, or returns it as it is.
func unescapeOr(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// ParseLogQuery reads from=, limit= and read= into req: from is an index
// (1 and up), earliest (default) or latest; limit 1 to MaxLogLimit
// (default DefaultLogLimit); read linearizable (default), home or local.
func ParseLogQuery(q url.Values, req *LogRequest) error {
	for k := range q {
		switch k {
		case "from", "limit", "read":
		default:
			return badRequest("bad_query", "unknown parameter %q (want from, limit, read)", k)
		}
	}
	req.Limit = DefaultLogLimit
	req.FromEarliest = true
	if q.Has("from") && !req.Messages {
		return badRequest("bad_query", "from and limit belong to /v1/topics/{topic}/messages")
	}
	if q.Has("limit") && !req.Messages {
		return badRequest("bad_query", "from and limit belong to /v1/topics/{topic}/messages")
	}
	switch f := q.Get("from"); f {
	case "", "earliest":
	case "latest":
		req.FromEarliest, req.FromLatest = false, true
	default:
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil || n == 0 {
			return badRequest("bad_from", "from: want an index (1 and up), earliest or latest, not %q", f)
		}
		req.FromEarliest, req.From = false, n
	}
	if l := q.Get("limit"); l != "" || q.Has("limit") {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxLogLimit {
			return badRequest("bad_limit", "limit: want a number from 1 to %d, not %q", MaxLogLimit, l)
		}
		req.Limit = n
	}
	switch r := q.Get("read"); r {
	case "", "linearizable":
		req.Where = ReadLinearizable
	case "home":
		req.Where = ReadHome
	case "local":
		req.Where = ReadLocal
	default:
		return badRequest("bad_read", "read: want linearizable (the default), home or local, not %q", r)
	}
	return nil
}

// compactedBody is the 410 answer: the error and the first index held.
type compactedBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Topic string `json:"topic"`
	First uint64 `json:"first"`
}

// serveHistory answers a request under HistoryPrefix.
func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path+"; allowed: GET, HEAD")
		return
	}
	req, err := ParseLogPath(r.URL.EscapedPath())
	if err == nil {
		err = ParseLogQuery(r.URL.Query(), &req)
	}
	if err != nil {
		var re *requestError
		errors.As(err, &re)
		WriteError(w, http.StatusBadRequest, re.code, re.msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), historyTimeout)
	defer cancel()
	if !req.Messages {
		info, err := s.history.TopicLog(ctx, req.Topic, req.Where)
		if err != nil {
			writeHistoryError(w, req.Topic, err)
			return
		}
		writeJSON(w, http.StatusOK, info)
		return
	}
	page, err := ReadLog(ctx, s.history, req)
	if err != nil {
		writeHistoryError(w, req.Topic, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// ReadLog answers a messages request from h.
func ReadLog(ctx context.Context, h History, req LogRequest) (LogPage, error) {
	from := req.From
	switch {
	case req.FromEarliest:
		from = 0 // the first held
	case req.FromLatest:
		if lr, ok := h.(LatestReader); ok {
			recs, info, err := lr.LatestRecords(ctx, req.Topic, req.Where)
			if err != nil {
				return LogPage{}, err
			}
			page := LogPage{TopicLog: info, From: max(info.Latest, 1), Next: info.Latest + 1, Messages: recs}
			if page.Messages == nil {
				page.Messages = []LogRecord{}
			}
			return page, nil
		}
		info, err := h.TopicLog(ctx, req.Topic, req.Where)
		if err != nil {
			return LogPage{}, err
		}
		if info.Count == 0 { // retention removed every record
			return LogPage{TopicLog: info, From: info.Latest + 1, Next: info.Latest + 1, Messages: []LogRecord{}}, nil
		}
		from = max(info.Latest, 1)
	}
	recs, info, err := h.LogRecords(ctx, req.Topic, from, req.Limit, req.Where)
	if err != nil {
		return LogPage{}, err
	}
	if req.FromEarliest {
		from = max(info.First, 1)
		if len(recs) > 0 {
			from = recs[0].Index
		}
	}
	page := LogPage{TopicLog: info, From: from, Next: from, Messages: recs}
	if page.Messages == nil {
		page.Messages = []LogRecord{}
	}
	if n := len(recs); n > 0 {
		page.Next = recs[n-1].Index + 1
	}
	return page, nil
}

func writeHistoryError(w http.ResponseWriter, name string, err error) {
	var ce *CompactedError
	switch {
	case errors.As(err, &ce):
		writeJSON(w, http.StatusGone, compactedBody{Error: ce.Error(), Code: "compacted", Topic: ce.Topic, First: ce.First})
	case errors.Is(err, ErrNotSequenced):
		WriteError(w, http.StatusConflict, "not_sequenced",
			fmt.Sprintf("topic %q is not sequenced: its policy rule's mode is direct, so it keeps no history (see sextant policy)", name))
	case errors.Is(err, ErrUnknownTopic):
		WriteError(w, http.StatusNotFound, "unknown_topic",
			fmt.Sprintf("topic %q is sequenced but has no log: nothing was ever published to it", name))
	case errors.Is(err, ErrUnavailable):
		WriteError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("topic %q: %v", name, err))
	case errors.Is(err, context.DeadlineExceeded):
		WriteError(w, http.StatusServiceUnavailable, "timeout", fmt.Sprintf("topic %q: no replica of its group answered within %v", name, historyTimeout))
	default:
		WriteError(w, http.StatusInternalServerError, "internal", fmt.Sprintf("topic %q: %v", name, err))
	}
}
