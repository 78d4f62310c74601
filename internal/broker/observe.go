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

// accessClient is a client as the monitor sees it: its session, whose
// current connection's round trip is read when a report is made (not on
// the publish path). One pointer: making it a monitor.Client allocates
// nothing.
type accessClient struct{ s *session.Session }

var _ monitor.Client = accessClient{}

func (a accessClient) ClientID() string { return a.s.ID }

func (a accessClient) AccessRTT() time.Duration {
	c := a.s.Conn()
	if c == nil {
		return 0
	}
	d, _ := c.RTT()
	return d
}

// observeSubscribe tells the observer of the subscriptions a SUBSCRIBE
// added (codes: granted or not).
func (b *Broker) observeSubscribe(s *session.Session, reqs []session.SubRequest, codes []packet.ReasonCode) {
	o := b.observer
	if o == nil {
		return
	}
	cl := accessClient{s}
	for i, r := range reqs {
		if !codes[i].IsError() {
			o.Subscribed(cl, r.Filter)
		}
	}
}

// observeAttach tells the observer of the subscriptions a resumed (or
// moved-in) session brings to its new connection.
func (b *Broker) observeAttach(s *session.Session) {
	o := b.observer
	if o == nil {
		return
	}
	cl := accessClient{s}
	for f := range s.Subscriptions() {
		o.Subscribed(cl, f)
	}
}
