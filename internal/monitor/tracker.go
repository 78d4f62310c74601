package monitor

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/topic"
)

// Client is a connected client as its access node sees it.
type Client interface {
	ClientID() string
	// AccessRTT is the current round-trip time between the client and
	// this node (TCP_INFO or MQTT round trips); 0 when unknown. It is
	// called when a report is made, not on every message.
	AccessRTT() time.Duration
}

// Observer is what the broker tells the monitor about sequenced topics.
// Every method is cheap (a map update under a mutex) and never blocks on
// I/O, so the publish path may call it inline.
type Observer interface {
	// Published: this access node accepted a PUBLISH from c on a
	// sequenced topic (once per message, whatever its QoS, before it is
	// forwarded to the group's home).
	Published(c Client, topic string)
	// Delivered: a committed record of a sequenced topic reached this node
	// for its local subscribers (once per record and node, not per
	// subscriber: it is what the home sends this node).
	Delivered(topic string)
	// Subscribed: c holds a subscription with filter (a $share filter
	// counts its inner filter) that may match sequenced topics. Call it
	// again for a session's subscriptions when the client reconnects.
	Subscribed(c Client, filter string)
	// Unsubscribed: c's subscription with filter ended.
	Unsubscribed(clientID, filter string)
	// Gone: the client's connection ended; it is no longer a producer or
	// consumer here.
	Gone(clientID string)
}

var _ Observer = (*Tracker)(nil)

// Limits bound a Tracker. Zero fields take the defaults named.
type Limits struct {
	// MaxTopics bounds the topics tracked (default 10,000, at most
	// MaxReportTopics); activity on further topics is dropped and counted.
	MaxTopics int
	// MaxClients bounds the producer and subscription entries over all
	// topics (default 1<<20); further ones are dropped and counted.
	MaxClients int
	// IdleReports: a producer that has not published, and a topic that saw
	// no publish and no delivery, for this many reports are forgotten
	// (default 12: a minute at 5 s reports).
	IdleReports uint64
}

func (l Limits) withDefaults() Limits {
	if l.MaxTopics <= 0 {
		l.MaxTopics = 10_000
	}
	l.MaxTopics = min(l.MaxTopics, MaxReportTopics)
	if l.MaxClients <= 0 {
		l.MaxClients = 1 << 20
	}
	if l.IdleReports == 0 {
		l.IdleReports = 12
	}
	return l
}

// Drop reasons, the keys of Tracker.Dropped.
const (
	DropTopics  = "topics"  // activity on a topic beyond Limits.MaxTopics
	DropClients = "clients" // a producer or subscription beyond Limits.MaxClients
)

// Tracker keeps the producers, consumers and rates of the sequenced topics
// at this access node. The zero value is not usable: call NewTracker.
type Tracker struct {
	limits Limits // immutable after NewTracker

	droppedTopics, droppedClients atomic.Uint64

	mu struct {
		sync.Mutex
		report   uint64 // reports made so far: the current window's number
		topics   map[string]*topicState
		exact    map[string]map[subKey]Client // inner filter without wildcards -> subscriptions
		wild     map[string]map[subKey]Client // inner filter with wildcards -> subscriptions
		byClient map[string]*clientEntries
		entries  int // producers and subscriptions held
	}
}

type topicState struct {
	producers map[string]*producer // by client ID
	published uint64               // this window
	delivered uint64               // this window
	active    uint64               // last window with a publish or a delivery
}

type producer struct {
	c      Client
	active uint64 // last window it published in
}

// subKey is one subscription: a client may hold the same inner filter
// twice (plain and through a $share group).
type subKey struct {
	client, filter string // filter as given
}

// clientEntries indexes one client's entries, so Gone finds them.
type clientEntries struct {
	topics  map[string]struct{} // produced to
	filters map[string]struct{} // subscribed with (as given)
}

// NewTracker returns an empty Tracker.
func NewTracker(l Limits) *Tracker {
	t := &Tracker{limits: l.withDefaults()}
	t.mu.topics = map[string]*topicState{}
	t.mu.exact = map[string]map[subKey]Client{}
	t.mu.wild = map[string]map[subKey]Client{}
	t.mu.byClient = map[string]*clientEntries{}
	return t
}

// Dropped returns what the bounds dropped since the tracker was made, by
// reason (DropTopics, DropClients).
func (t *Tracker) Dropped() map[string]uint64 {
	return map[string]uint64{DropTopics: t.droppedTopics.Load(), DropClients: t.droppedClients.Load()}
}

// topicLocked returns the state of name, creating it within the bound; nil
// when the bound is reached.
func (t *Tracker) topicLocked(name string) *topicState {
	ts := t.mu.topics[name]
	if ts == nil {
		if len(t.mu.topics) >= t.limits.MaxTopics {
			t.droppedTopics.Add(1)
			return nil
		}
		ts = &topicState{producers: map[string]*producer{}}
		t.mu.topics[name] = ts
	}
	ts.active = t.mu.report
	return ts
}

func (t *Tracker) entriesLocked(id string) *clientEntries {
	ce := t.mu.byClient[id]
	if ce == nil {
		ce = &clientEntries{topics: map[string]struct{}{}, filters: map[string]struct{}{}}
		t.mu.byClient[id] = ce
	}
	return ce
}

// Published implements Observer.
func (t *Tracker) Published(c Client, name string) {
	id := c.ClientID()
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := t.topicLocked(name)
	if ts == nil {
		return
	}
	ts.published++
	p := ts.producers[id]
	if p == nil {
		if t.mu.entries >= t.limits.MaxClients {
			t.droppedClients.Add(1)
			return
		}
		t.mu.entries++
		p = &producer{}
		ts.producers[id] = p
		t.entriesLocked(id).topics[name] = struct{}{}
	}
	p.c, p.active = c, t.mu.report // a reconnected client brings a new Client
}

// Delivered implements Observer.
func (t *Tracker) Delivered(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts := t.topicLocked(name); ts != nil {
		ts.delivered++
	}
}

// Subscribed implements Observer.
func (t *Tracker) Subscribed(c Client, filter string) {
	inner := filter
	if _, f, shared, err := topic.ParseShared(filter); err == nil && shared {
		inner = f
	}
	id := c.ClientID()
	t.mu.Lock()
	defer t.mu.Unlock()
	table := t.mu.exact
	if strings.ContainsAny(inner, "+#") {
		table = t.mu.wild
	}
	key := subKey{client: id, filter: filter}
	subs := table[inner]
	if _, ok := subs[key]; !ok {
		if t.mu.entries >= t.limits.MaxClients {
			t.droppedClients.Add(1)
			return
		}
		t.mu.entries++
	}
	if subs == nil {
		subs = map[subKey]Client{}
		table[inner] = subs
	}
	subs[key] = c
	t.entriesLocked(id).filters[filter] = struct{}{}
}

// Unsubscribed implements Observer.
func (t *Tracker) Unsubscribed(clientID, filter string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unsubscribeLocked(clientID, filter)
	if ce := t.mu.byClient[clientID]; ce != nil {
		delete(ce.filters, filter)
		t.forgetIfEmptyLocked(clientID, ce)
	}
}

func (t *Tracker) unsubscribeLocked(clientID, filter string) {
	inner := filter
	if _, f, shared, err := topic.ParseShared(filter); err == nil && shared {
		inner = f
	}
	key := subKey{client: clientID, filter: filter}
	for _, table := range [2]map[string]map[subKey]Client{t.mu.exact, t.mu.wild} {
		if subs, ok := table[inner]; ok {
			if _, ok := subs[key]; ok {
				delete(subs, key)
				t.mu.entries--
				if len(subs) == 0 {
					delete(table, inner)
				}
			}
		}
	}
}

func (t *Tracker) forgetIfEmptyLocked(id string, ce *clientEntries) {
	if len(ce.topics) == 0 && len(ce.filters) == 0 {
		delete(t.mu.byClient, id)
	}
}

// Gone implements Observer.
func (t *Tracker) Gone(clientID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ce := t.mu.byClient[clientID]
	if ce == nil {
		return
	}
	for name := range ce.topics {
		if ts := t.mu.topics[name]; ts != nil {
			if _, ok := ts.producers[clientID]; ok {
				delete(ts.producers, clientID)
				t.mu.entries--
			}
		}
	}
	for filter := range ce.filters {
		t.unsubscribeLocked(clientID, filter)
	}
	delete(t.mu.byClient, clientID)
}

// pendingTopic is one topic's entries copied out under the lock.
type pendingTopic struct {
	name                 string
	producers, consumers []Client
	published, delivered uint64
}

// Report folds what was seen since the last report, which covered window,
// into one entry per topic, sorted by topic, and starts a new window. Rates
// are counts over window. Topics and producers idle for Limits.IdleReports
// reports are forgotten first.
func (t *Tracker) Report(window time.Duration) []TopicReport {
	pending := t.collect()
	rtts := map[string]time.Duration{}
	rtt := func(c Client) time.Duration {
		id := c.ClientID()
		d, ok := rtts[id]
		if !ok {
			d = max(c.AccessRTT(), 0)
			rtts[id] = d
		}
		return d
	}
	fold := func(cs []Client, n uint64) Side {
		s := Side{Count: len(cs)}
		for _, c := range cs {
			s.MaxRTT = max(s.MaxRTT, rtt(c))
		}
		if window > 0 {
			s.Rate = float64(n) / window.Seconds()
		}
		return s
	}
	out := make([]TopicReport, 0, len(pending))
	for _, p := range pending {
		out = append(out, TopicReport{Topic: p.name, Producers: fold(p.producers, p.published), Consumers: fold(p.consumers, p.delivered)})
	}
	return out
}

// collect expires idle entries, copies out every topic's clients and
// counts, and starts the next window.
func (t *Tracker) collect() []pendingTopic {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.mu.report
	idle := func(active uint64) bool { return active+t.limits.IdleReports < now }
	names := make([]string, 0, len(t.mu.topics))
	for name, ts := range t.mu.topics {
		for id, p := range ts.producers {
			if idle(p.active) {
				delete(ts.producers, id)
				t.mu.entries--
				if ce := t.mu.byClient[id]; ce != nil {
					delete(ce.topics, name)
					t.forgetIfEmptyLocked(id, ce)
				}
			}
		}
		if idle(ts.active) && len(ts.producers) == 0 {
			delete(t.mu.topics, name)
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]pendingTopic, 0, len(names))
	for _, name := range names {
		ts := t.mu.topics[name]
		p := pendingTopic{name: name, published: ts.published, delivered: ts.delivered}
		for _, pr := range ts.producers {
			p.producers = append(p.producers, pr.c)
		}
		seen := map[string]bool{}
		add := func(subs map[subKey]Client) {
			for k, c := range subs {
				if !seen[k.client] {
					seen[k.client] = true
					p.consumers = append(p.consumers, c)
				}
			}
		}
		add(t.mu.exact[name])
		for filter, subs := range t.mu.wild {
			if topic.Match(filter, name) {
				add(subs)
			}
		}
		ts.published, ts.delivered = 0, 0
		out = append(out, p)
	}
	t.mu.report++
	return out
}
