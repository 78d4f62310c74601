package adminapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sextantmq/sextant/internal/topic"
)

// ClientDetail is GET /v1/clients/{id}: one session held by this node,
// connected or not, with its subscriptions.
type ClientDetail struct {
	ID       string  `json:"client_id"`
	Online   bool    `json:"online"`
	Remote   string  `json:"remote,omitempty"`
	User     string  `json:"user,omitempty"`
	Protocol string  `json:"protocol"`
	RTTms    float64 `json:"rtt_ms,omitempty"`
	// SessionExpiry is the session expiry interval in seconds (0: the
	// session ends with its connection).
	SessionExpiry uint32             `json:"session_expiry_seconds"`
	Queued        int                `json:"queued"`
	Inflight      int                `json:"inflight"`
	Spilled       int                `json:"spilled"`
	Subscriptions []SubscriptionInfo `json:"subscriptions"`
}

// SessionInfo is one entry of GET /v1/sessions: a session held by this
// node, connected or not.
type SessionInfo struct {
	ID            string `json:"client_id"`
	Online        bool   `json:"online"`
	Protocol      string `json:"protocol"`
	SessionExpiry uint32 `json:"session_expiry_seconds"`
	Subscriptions int    `json:"subscriptions"`
	Queued        int    `json:"queued"`   // waiting in memory
	Inflight      int    `json:"inflight"` // sent, not yet acknowledged
	Spilled       int    `json:"spilled"`  // kept on disk beyond the memory queue
}

// SubscriptionInfo is one entry of GET /v1/subscriptions.
type SubscriptionInfo struct {
	ClientID          string `json:"client_id"`
	Filter            string `json:"filter"` // "$share/group/filter" for a shared subscription
	QoS               byte   `json:"qos"`
	NoLocal           bool   `json:"no_local,omitempty"`
	RetainAsPublished bool   `json:"retain_as_published,omitempty"`
	RetainHandling    byte   `json:"retain_handling,omitempty"`
	ID                uint32 `json:"subscription_id,omitempty"`
}

// RetainedInfo is one entry of GET /v1/retained. The payload is given as
// text when it is valid UTF-8, else in base64.
type RetainedInfo struct {
	Topic         string     `json:"topic"`
	QoS           byte       `json:"qos"`
	Bytes         int        `json:"bytes"`
	Payload       string     `json:"payload,omitempty"`
	PayloadBase64 string     `json:"payload_base64,omitempty"`
	ContentType   string     `json:"content_type,omitempty"`
	Publisher     string     `json:"publisher,omitempty"`
	Created       time.Time  `json:"created"`
	Expires       *time.Time `json:"expires,omitempty"`
}

// TopicInfo is one entry of GET /v1/topics: a topic this node holds
// something for (a retained message; the topics of sequenced placement
// groups will join them), how its policy rule routes it, and who receives
// it.
type TopicInfo struct {
	Topic string `json:"topic"`
	// Mode is the policy rule's mode for the topic: direct or sequenced.
	Mode     string `json:"mode"`
	Retained bool   `json:"retained"`
	// Subscriptions counts this node's subscriptions whose filter matches
	// the topic; RemoteNodes lists the other nodes with a matching
	// subscriber.
	Subscriptions int      `json:"local_subscriptions"`
	RemoteNodes   []string `json:"remote_nodes"`
}

// Inspector answers the listing endpoints from the node's state.
type Inspector interface {
	Client(id string) (ClientDetail, bool)
	Sessions() []SessionInfo
	Subscriptions(clientID string) []SubscriptionInfo
	// Retained returns the retained messages whose topic filter matches,
	// at most limit, sorted by topic.
	Retained(filter string, limit int) []RetainedInfo
	// Topics returns the topics matching filter, at most limit, sorted.
	Topics(filter string, limit int) []TopicInfo
}

// Kicker disconnects a client for an operator; with discard its session
// ends too. It reports whether the node held a session for id.
type Kicker interface {
	Kick(id string, discard bool) bool
}

// KickResult is the answer of DELETE /v1/clients/{id} and
// DELETE /v1/sessions/{id}.
type KickResult struct {
	ID               string `json:"client_id"`
	SessionDiscarded bool   `json:"session_discarded"`
}

// Limits of the listing endpoints' limit parameter.
const (
	defaultListLimit = 1000
	maxListLimit     = 100_000
)

// WithInspector adds GET /v1/clients/{id}, /v1/sessions,
// /v1/subscriptions, /v1/retained and /v1/topics.
func (s *Server) WithInspector(in Inspector) *Server {
	s.mux.HandleFunc("GET /v1/clients/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		d, ok := in.Client(id)
		if !ok {
			WriteError(w, http.StatusNotFound, "no_such_client", "this node holds no session for client "+strconv.Quote(id))
			return
		}
		d.Subscriptions = nonNil(d.Subscriptions)
		writeJSON(w, http.StatusOK, d)
	})
	s.mux.HandleFunc("GET /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(in.Sessions()))
	})
	s.mux.HandleFunc("GET /v1/subscriptions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(in.Subscriptions(r.URL.Query().Get("client"))))
	})
	s.mux.HandleFunc("GET /v1/retained", func(w http.ResponseWriter, r *http.Request) {
		filter, limit, ok := listParams(w, r)
		if ok {
			writeJSON(w, http.StatusOK, nonNil(in.Retained(filter, limit)))
		}
	})
	s.mux.HandleFunc("GET /v1/topics", func(w http.ResponseWriter, r *http.Request) {
		filter, limit, ok := listParams(w, r)
		if ok {
			writeJSON(w, http.StatusOK, nonNil(in.Topics(filter, limit)))
		}
	})
	return s
}

// WithKick adds DELETE /v1/clients/{id} (disconnect; with
// ?discard_session=true the session ends too) and DELETE /v1/sessions/{id}
// (disconnect if connected, and end the session).
func (s *Server) WithKick(k Kicker) *Server {
	kick := func(w http.ResponseWriter, r *http.Request, discard bool) {
		id := r.PathValue("id")
		if !k.Kick(id, discard) {
			WriteError(w, http.StatusNotFound, "no_such_client", "this node holds no session for client "+strconv.Quote(id))
			return
		}
		writeJSON(w, http.StatusOK, KickResult{ID: id, SessionDiscarded: discard})
	}
	s.mux.HandleFunc("DELETE /v1/clients/{id}", func(w http.ResponseWriter, r *http.Request) {
		discard, err := strconv.ParseBool(r.URL.Query().Get("discard_session"))
		if err != nil && r.URL.Query().Has("discard_session") {
			WriteError(w, http.StatusBadRequest, "bad_request", "discard_session must be true or false")
			return
		}
		kick(w, r, discard)
	})
	s.mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) { kick(w, r, true) })
	return s
}

// listParams reads ?filter= (an MQTT topic filter, default "#") and
// ?limit= (default 1000); on a bad value it answers 400 and reports false.
func listParams(w http.ResponseWriter, r *http.Request) (filter string, limit int, ok bool) {
	q := r.URL.Query()
	filter, limit = "#", defaultListLimit
	if f := q.Get("filter"); f != "" {
		filter = f
	}
	if err := topic.ValidateFilter(filter); err != nil {
		WriteError(w, http.StatusBadRequest, "bad_filter", "filter: "+err.Error())
		return "", 0, false
	}
	if _, _, shared, _ := topic.ParseShared(filter); shared {
		WriteError(w, http.StatusBadRequest, "bad_filter", "filter: a shared subscription filter selects no topics; give its inner filter")
		return "", 0, false
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			WriteError(w, http.StatusBadRequest, "bad_limit", "limit: want a number from 1 to "+strconv.Itoa(maxListLimit))
			return "", 0, false
		}
		limit = n
	}
	return filter, limit, true
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
