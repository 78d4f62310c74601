package broker

import (
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/topic"
)

// Subscribe implements session.Hub.
func (b *Broker) Subscribe(s *session.Session, reqs []session.SubRequest, done func([]packet.ReasonCode)) {
	codes := make([]packet.ReasonCode, len(reqs))
	existed := make([]bool, len(reqs))
	var changes []interestChange
	if b.replays != nil {
		b.replays.Subscribing(s, reqs)
	}
	b.subs.Lock()
	for i, r := range reqs {
		if _, err := b.subscribeLocked(s, r.Filter, r.Opts, &changes); err != nil {
			codes[i] = packet.TopicFilterInvalid
			continue
		}
		codes[i] = packet.ReasonCode(r.Opts.QoS)
	}
	n := b.subs.ix.Len()
	b.subs.Unlock()
	b.metrics.Subscriptions.Set(float64(n))
	b.announceInterest(changes)
	for i, r := range reqs {
		if !codes[i].IsError() {
			existed[i] = s.AddSubscription(r.Filter, r.Opts)
		}
	}
	b.observeSubscribe(s, reqs, codes)
	finish := func() {
		done(codes)
		b.sendRetained(s, reqs, codes, existed)
		if b.replays != nil {
			b.replays.Subscribed(s, reqs, codes, existed)
		}
	}
	if s.Persistent() && b.store != nil {
		b.persistSession(s, b.clock.Now(), func(err error) {
			if err != nil {
				b.log.Error("persisting subscriptions failed", "client", s.ID, "err", err)
				for i := range codes {
					if !codes[i].IsError() {
						codes[i] = packet.ImplementationSpecificError
					}
				}
			}
			finish()
		})
		return
	}
	finish()
}

// sendRetained queues the retained messages matching new subscriptions,
// following each subscription's Retain Handling.
func (b *Broker) sendRetained(s *session.Session, reqs []session.SubRequest, codes []packet.ReasonCode, existed []bool) {
	var ps session.Persist
	now := b.clock.Now()
	for i, r := range reqs {
		if codes[i].IsError() {
			continue
		}
		if _, _, shared, _ := topic.ParseShared(r.Filter); shared {
			continue // retained messages are not sent for shared subscriptions
		}
		switch r.Opts.RetainHandling {
		case 1:
			if existed[i] {
				continue
			}
		case 2:
			continue
		}
		var expired []string
		b.retained.Match(r.Filter, func(m *message.Message) bool {
			if m.Expired(now) {
				expired = append(expired, m.Topic)
				return true
			}
			dl := session.Delivery{Msg: m, QoS: min(m.QoS, r.Opts.QoS), Retain: true}
			if r.Opts.ID != 0 {
				dl.IDs = []uint32{r.Opts.ID}
			}
			out, _ := s.Deliver(dl, &ps)
			return out != session.Full && out != session.Gone
		})
		for _, t := range expired {
			b.retained.Delete(t)
			if b.store != nil {
				ps.Add().DeleteRetained(t)
			}
		}
	}
	b.commitPersist(&ps)
}

// subscribeLocked adds a subscription to the index and notes it for the
// cluster's interest; b.subs must be held for writing.
func (b *Broker) subscribeLocked(s *session.Session, filter string, o router.Options, changes *[]interestChange) (bool, error) {
	existed, err := b.subs.ix.Subscribe(s, filter, o)
	if err == nil && !existed {
		b.noteInterest(filter, 1, changes)
	}
	return existed, err
}

// unsubscribeLocked removes a subscription; b.subs must be held for writing.
func (b *Broker) unsubscribeLocked(s *session.Session, filter string, changes *[]interestChange) bool {
	if !b.subs.ix.Unsubscribe(s, filter) {
		return false
	}
	b.noteInterest(filter, -1, changes)
	return true
}

// Unsubscribe implements session.Hub.
func (b *Broker) Unsubscribe(s *session.Session, filters []string, done func([]packet.ReasonCode)) {
	codes := make([]packet.ReasonCode, len(filters))
	var changes []interestChange
	b.subs.Lock()
	for i, f := range filters {
		if !b.unsubscribeLocked(s, f, &changes) {
			codes[i] = packet.NoSubscriptionExisted
		}
	}
	n := b.subs.ix.Len()
	b.subs.Unlock()
	b.metrics.Subscriptions.Set(float64(n))
	b.announceInterest(changes)
	for _, f := range filters {
		s.RemoveSubscription(f)
	}
	if o := b.observer; o != nil {
		for i, f := range filters {
			if !codes[i].IsError() {
				o.Unsubscribed(s.ID, f)
			}
		}
	}
	if s.Persistent() && b.store != nil {
		b.persistSession(s, b.clock.Now(), func(err error) {
			if err != nil {
				b.log.Error("persisting subscriptions failed", "client", s.ID, "err", err)
			}
			done(codes)
		})
		return
	}
	done(codes)
}
