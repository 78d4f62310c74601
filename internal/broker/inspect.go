package broker

import (
	"slices"
	"strings"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/session"
)

// This file answers the admin API's questions about the sessions,
// subscriptions and retained messages this node holds, and carries out an
// operator's disconnect. Everything returned is a copy.

// SessionInfo is one session held here, connected or not.
type SessionInfo struct {
	ClientID      string
	Online        bool
	Version       packet.Version
	Expiry        uint32 // seconds; 0: ends with its connection
	Subscriptions int
	Queued        int // waiting in memory
	Inflight      int // sent and not yet acknowledged
	Spilled       int // kept on disk beyond the memory queue
}

// Subscription is one subscription of a session held here.
type Subscription struct {
	ClientID string
	Filter   string // as subscribed: "$share/group/filter" for a shared one
	router.Options
}

// ClientDetail is one session in full: its counts, its connection (nil
// Conn fields when offline) and its subscriptions.
type ClientDetail struct {
	SessionInfo
	Remote        string // "" when offline
	User          string
	Subscriptions []Subscription
}

// Sessions lists the sessions held here, sorted by client id.
func (b *Broker) Sessions() []SessionInfo {
	ss := b.sessionList()
	out := make([]SessionInfo, 0, len(ss))
	for _, s := range ss {
		out = append(out, sessionInfo(s))
	}
	return out
}

func (b *Broker) sessionList() []*session.Session {
	b.mu.Lock()
	ss := make([]*session.Session, 0, len(b.mu.sessions))
	for _, s := range b.mu.sessions {
		ss = append(ss, s)
	}
	b.mu.Unlock()
	slices.SortFunc(ss, func(a, c *session.Session) int { return strings.Compare(a.ID, c.ID) })
	return ss
}

func sessionInfo(s *session.Session) SessionInfo {
	q, in, sp := s.Pending()
	return SessionInfo{
		ClientID: s.ID, Online: s.Online(), Version: s.Version(), Expiry: s.Expiry(),
		Subscriptions: s.SubscriptionCount(), Queued: q, Inflight: in, Spilled: sp,
	}
}

// Client returns the session of clientID in full, if it is held here.
func (b *Broker) Client(clientID string) (ClientDetail, bool) {
	b.mu.Lock()
	s := b.mu.sessions[clientID]
	b.mu.Unlock()
	if s == nil {
		return ClientDetail{}, false
	}
	d := ClientDetail{SessionInfo: sessionInfo(s), Subscriptions: subscriptionsOf(s)}
	if c := s.Conn(); c != nil {
		d.Remote, d.User = c.RemoteAddr().String(), c.User()
	}
	return d, true
}

// Subscriptions lists the subscriptions of the sessions held here (of
// clientID alone when it is not ""), sorted by client id then filter.
func (b *Broker) Subscriptions(clientID string) []Subscription {
	var out []Subscription
	for _, s := range b.sessionList() {
		if clientID == "" || s.ID == clientID {
			out = append(out, subscriptionsOf(s)...)
		}
	}
	return out
}

func subscriptionsOf(s *session.Session) []Subscription {
	subs := s.Subscriptions()
	out := make([]Subscription, 0, len(subs))
	for f, o := range subs {
		out = append(out, Subscription{ClientID: s.ID, Filter: f, Options: o})
	}
	slices.SortFunc(out, func(a, c Subscription) int { return strings.Compare(a.Filter, c.Filter) })
	return out
}

// Filters calls fn with each distinct subscribed filter (shared ones as
// "$share/group/filter") and how many local subscriptions it has.
func (b *Broker) Filters(fn func(filter string, n int)) {
	b.subs.RLock()
	defer b.subs.RUnlock()
	b.subs.ix.Filters(fn)
}

// Retained returns the retained messages whose topics filter matches,
// sorted by topic, at most limit of them (limit <= 0: all), and whether
// more matched.
func (b *Broker) Retained(filter string, limit int) ([]*message.Message, bool) {
	var out []*message.Message
	more := false
	b.retained.Match(filter, func(m *message.Message) bool {
		out = append(out, m)
		return true
	})
	slices.SortFunc(out, func(a, c *message.Message) int { return strings.Compare(a.Topic, c.Topic) })
	if limit > 0 && len(out) > limit {
		out, more = out[:limit], true
	}
	return out, more
}

// Kick disconnects clientID's connection for an operator (MQTT 5:
// DISCONNECT 0x98 administrative action). With discard its session ends
// too, connected or not (a will still pending is published, as when a
// session expires); without, a persistent session stays for the client's
// return. It reports whether a session for clientID was held here, and
// returns once the connection has ended.
func (b *Broker) Kick(clientID string, discard bool) bool {
	b.mu.Lock()
	s := b.mu.sessions[clientID]
	b.mu.Unlock()
	if s == nil {
		return false
	}
	if discard {
		s.SetExpiry(0) // Detach ends it with its connection
	}
	if c := s.Conn(); c != nil {
		b.log.Info("disconnecting a client for an operator", "client", clientID, "discard_session", discard)
		c.Disconnect(packet.AdministrativeAction, "disconnected by an operator")
		<-c.Done()
	}
	if discard && b.offlineAndCurrent(s) { // it was offline, or came back in between
		if w, _ := s.TakeWill(); w != nil {
			b.publishWill(s, w)
		}
		b.endSession(s)
		b.updateSessionGauges()
	}
	return true
}
