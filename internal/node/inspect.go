package node

import (
	"encoding/base64"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/topic"
)

// inspector answers the admin API's listings (adminapi.Inspector) from the
// broker, the cluster layer's view of other nodes' interest, and the
// policy rules; and disconnects clients for an operator.
type inspector struct{ n *Node }

var (
	_ adminapi.Inspector = inspector{}
	_ adminapi.Kicker    = inspector{}
)

func (in inspector) Client(id string) (adminapi.ClientDetail, bool) {
	d, ok := in.n.broker.Client(id)
	if !ok {
		return adminapi.ClientDetail{}, false
	}
	out := adminapi.ClientDetail{
		ID: d.ClientID, Online: d.Online, Remote: d.Remote, User: d.User, Protocol: d.Version.String(),
		SessionExpiry: d.Expiry, Queued: d.Queued, Inflight: d.Inflight, Spilled: d.Spilled,
		Subscriptions: subscriptionInfos(d.Subscriptions),
	}
	for _, c := range in.n.broker.Clients() {
		if c.ID == id {
			out.RTTms = float64(c.RTT) / float64(time.Millisecond)
		}
	}
	return out, true
}

func (in inspector) Sessions() []adminapi.SessionInfo {
	ss := in.n.broker.Sessions()
	out := make([]adminapi.SessionInfo, 0, len(ss))
	for _, s := range ss {
		out = append(out, adminapi.SessionInfo{
			ID: s.ClientID, Online: s.Online, Protocol: s.Version.String(), SessionExpiry: s.Expiry,
			Subscriptions: s.Subscriptions, Queued: s.Queued, Inflight: s.Inflight, Spilled: s.Spilled,
		})
	}
	return out
}

func (in inspector) Subscriptions(clientID string) []adminapi.SubscriptionInfo {
	return subscriptionInfos(in.n.broker.Subscriptions(clientID))
}

func subscriptionInfos(subs []broker.Subscription) []adminapi.SubscriptionInfo {
	out := make([]adminapi.SubscriptionInfo, 0, len(subs))
	for _, s := range subs {
		out = append(out, adminapi.SubscriptionInfo{
			ClientID: s.ClientID, Filter: s.Filter, QoS: s.QoS, NoLocal: s.NoLocal,
			RetainAsPublished: s.RetainAsPublished, RetainHandling: s.RetainHandling, ID: s.ID,
		})
	}
	return out
}

func (in inspector) Retained(filter string, limit int) []adminapi.RetainedInfo {
	ms, _ := in.n.broker.Retained(filter, limit)
	out := make([]adminapi.RetainedInfo, 0, len(ms))
	for _, m := range ms {
		ri := adminapi.RetainedInfo{Topic: m.Topic, QoS: m.QoS, Bytes: len(m.Payload), ContentType: m.ContentType,
			Publisher: m.Publisher, Created: m.Created}
		if utf8.Valid(m.Payload) {
			ri.Payload = string(m.Payload)
		} else {
			ri.PayloadBase64 = base64.StdEncoding.EncodeToString(m.Payload)
		}
		if !m.Expiry.IsZero() {
			e := m.Expiry
			ri.Expires = &e
		}
		out = append(out, ri)
	}
	return out
}

// Topics lists the topics this node holds a retained message for, with the
// mode their policy rule gives them, how many of this node's subscriptions
// match them and which other nodes have a matching subscriber.
func (in inspector) Topics(filter string, limit int) []adminapi.TopicInfo {
	ms, _ := in.n.broker.Retained(filter, limit)
	var local []filterCount
	in.n.broker.Filters(func(f string, c int) { local = append(local, filterCount{innerFilter(f), c}) })
	var remote map[string][]string
	if cp := in.n.cluster; cp != nil && cp.layer != nil {
		remote = cp.layer.RemoteInterest()
	}
	rules := in.rules()
	out := make([]adminapi.TopicInfo, 0, len(ms))
	for _, m := range ms {
		ti := adminapi.TopicInfo{Topic: m.Topic, Mode: string(rules.RuleFor(m.Topic).Mode), Retained: true, RemoteNodes: []string{}}
		for _, fc := range local {
			if topic.Match(fc.filter, m.Topic) {
				ti.Subscriptions += fc.n
			}
		}
		for node, fs := range remote {
			if slices.ContainsFunc(fs, func(f string) bool { return topic.Match(innerFilter(f), m.Topic) }) {
				ti.RemoteNodes = append(ti.RemoteNodes, node)
			}
		}
		slices.Sort(ti.RemoteNodes)
		out = append(out, ti)
	}
	return out
}

type filterCount struct {
	filter string
	n      int
}

// innerFilter is a subscription's filter without its $share/group/ prefix.
func innerFilter(f string) string {
	if _, inner, shared, err := topic.ParseShared(f); shared && err == nil {
		return inner
	}
	return f
}

// rules is the node's copy of the policy rules (none when it has no
// metadata group yet: every topic is direct).
func (in inspector) rules() fsm.State {
	if cp := in.n.cluster; cp != nil && cp.meta != nil {
		return cp.meta.State()
	}
	return fsm.State{}
}

func (in inspector) Kick(id string, discard bool) bool { return in.n.broker.Kick(id, discard) }
