package broker

import (
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// load rebuilds the broker's state from the store at start-up: retained
// messages, then persistent sessions with their subscriptions, in-flight and
// queued messages, inbound QoS 2 ids and pending wills. Sessions whose
// expiry passed while the node was down are deleted.
func (b *Broker) load() error {
	now := b.clock.Now()
	if err := b.store.LoadRetained(func(m *message.Message) error {
		if len(m.Payload) == 0 {
			b.mu.tombstones = append(b.mu.tombstones, m)
			return nil
		}
		if m.Expired(now) {
			return nil
		}
		b.retained.Set(m)
		return nil
	}); err != nil {
		return err
	}
	b.metrics.RetainedMessages.Set(float64(b.retained.Len()))

	var recs []*store.SessionRecord
	if err := b.store.LoadSessions(func(r *store.SessionRecord) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		return err
	}
	var gone store.Batch
	for _, r := range recs {
		disconnected := r.DisconnectedAt
		if disconnected.IsZero() {
			disconnected = now // it was connected when the node stopped
		}
		left := time.Duration(-1)
		if r.ExpiryInterval != session.NeverExpire {
			left = disconnected.Add(time.Duration(r.ExpiryInterval) * time.Second).Sub(now)
			if left <= 0 || r.ExpiryInterval == 0 {
				if r.Will != nil {
					b.willAtStart(r.ClientID, r.Will)
				}
				gone.DeleteSession(r.ClientID)
				continue
			}
		}
		s := session.New(r.ClientID, b.env, packet.Version(r.Version), r.ExpiryInterval)
		s.RestoreSubscribedAt(r.SubscribedAt)
		b.restoreSubscriptions(s, r.Subscriptions)
		if !r.SubscribedAt.IsZero() {
			if b.restoredSince == nil {
				b.restoredSince = map[string]time.Time{}
			}
			for _, sub := range r.Subscriptions {
				if t, ok := b.restoredSince[sub.Filter]; !ok || r.SubscribedAt.Before(t) {
					b.restoredSince[sub.Filter] = r.SubscribedAt
				}
			}
		}
		ids, err := b.store.LoadInbound(r.ClientID)
		if err != nil {
			return err
		}
		s.RestoreInbound(ids)
		s.RestoreCursors(r.Cursors)
		if err := b.store.LoadMessages(r.ClientID, func(q *store.QueuedMessage) error {
			s.Restore(q)
			return nil
		}); err != nil {
			return err
		}
		b.mu.Lock()
		b.mu.sessions[r.ClientID] = s
		b.mu.Unlock()

		var will *message.Message
		var delay uint32
		if r.Will != nil {
			will, delay = r.Will, r.WillDelay
			elapsed := uint32(now.Sub(disconnected) / time.Second)
			if elapsed >= delay {
				delay = 0
			} else {
				delay -= elapsed
			}
			s.SetWill(will, delay)
		}
		expiry := r.ExpiryInterval
		if left >= 0 {
			expiry = uint32((left + time.Second - 1) / time.Second)
		}
		b.armTimers(s, expiry, will, delay)
	}
	if gone.Len() > 0 {
		b.commitBehind(&gone)
	}
	b.subs.RLock()
	n := b.subs.ix.Len()
	b.subs.RUnlock()
	b.metrics.Subscriptions.Set(float64(n))
	b.updateSessionGauges()
	return nil
}

// restoreSubscriptions puts a restored or moved session's subscriptions
// into the index.
func (b *Broker) restoreSubscriptions(s *session.Session, subs []store.SubscriptionRecord) {
	var changes []interestChange
	b.subs.Lock()
	for _, sub := range subs {
		o := router.Options{QoS: sub.QoS, NoLocal: sub.NoLocal, RetainAsPublished: sub.RetainAsPublished, RetainHandling: sub.RetainHandling, ID: sub.ID}
		if _, err := b.subscribeLocked(s, sub.Filter, o, &changes); err == nil {
			s.AddSubscription(sub.Filter, o)
		}
	}
	n := b.subs.ix.Len()
	b.subs.Unlock()
	b.metrics.Subscriptions.Set(float64(n))
	b.announceInterest(changes)
}

// willAtStart publishes the will of a session that expired while the node
// was down; it is published once subscriptions are loaded, so it is queued
// as an ordinary message on the first timer tick.
func (b *Broker) willAtStart(clientID string, w *message.Message) {
	if !b.env.MayPublishWill(nil, clientID, w.Topic) {
		b.log.Info("will not published: not authorized", "client", clientID, "topic", w.Topic)
		return
	}
	b.clock.AfterFunc(0, func() { b.Publish(nil, w, nil) })
}
