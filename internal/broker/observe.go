package broker

import (
	"time"

	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
)

// SetObserver connects live placement's monitor (monitor.Tracker): it is
// told of the sequenced publishes this node accepts, the sequenced records
// its feeds deliver, subscriptions and connections ending. Call it before
// serving clients. Its calls are made outside the broker's locks; a
// publish of a direct topic never reaches it.
func (b *Broker) SetObserver(o monitor.Observer) { b.observer = o }

// accessClient is a client as the monitor sees it: its id and the round
// trip of its current connection, read when a report is made.
type accessClient struct {
	id string
	c  *session.Conn // nil: unknown (RTT 0)
}

var _ monitor.Client = accessClient{}

func (a accessClient) ClientID() string { return a.id }

func (a accessClient) AccessRTT() time.Duration {
	if a.c == nil {
		return 0
	}
	d, _ := a.c.RTT()
	return d
}

// observeSubscribe tells the observer of the subscriptions a SUBSCRIBE
// added (codes: granted or not).
func (b *Broker) observeSubscribe(s *session.Session, reqs []session.SubRequest, codes []packet.ReasonCode) {
	o := b.observer
	if o == nil {
		return
	}
	cl := accessClient{id: s.ID, c: s.Conn()}
	for i, r := range reqs {
		if !codes[i].IsError() {
			o.Subscribed(cl, r.Filter)
		}
	}
}

// observeAttach tells the observer of the subscriptions a resumed (or
// moved-in) session brings to its new connection c.
func (b *Broker) observeAttach(s *session.Session, c *session.Conn) {
	o := b.observer
	if o == nil {
		return
	}
	cl := accessClient{id: s.ID, c: c}
	for f := range s.Subscriptions() {
		o.Subscribed(cl, f)
	}
}
