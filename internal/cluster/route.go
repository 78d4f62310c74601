package cluster

import (
	"github.com/sextantmq/sextant/internal/cluster/routing"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/peer"
)

// Forward implements broker.Forwarder, the cross-node half of a publish:
// the routing table names the nodes (once each, with the shared groups each
// serves, preferring nodes that can be reached, directly or through a
// transit node), the message is encoded once, and each node gets one item
// in its outbox, whose order, acknowledgements and resends keep messages
// from one publisher reaching every node once and in the order they were
// published (package peer).
func (l *Layer) Forward(m *message.Message, served []string) {
	if l.group.Stopped() {
		return
	}
	tp := l.targets.Get().(*[]routing.Target)
	ts := l.routes.Route(m.Topic, served, l.peers.Reachable, (*tp)[:0])
	if len(ts) > 0 {
		enc := message.Append(make([]byte, 0, m.Size()), m)
		for i := range ts {
			l.peers.Publish(ts[i].Node, &peer.Publish{Msg: enc, QoS: m.QoS, Direct: ts[i].Direct, Groups: ts[i].Groups})
		}
		l.metrics.forwarded.Add(float64(len(ts)))
	}
	clear(ts)
	*tp = ts[:0]
	l.targets.Put(tp)
}

// receive is the remote half: a message another node forwarded here goes
// to local subscribers only (broker.DeliverForwarded), never further.
func (l *Layer) receive(node string, msg []byte, direct bool, groups []string) {
	m, err := message.Decode(msg)
	if err != nil {
		l.metrics.corrupt.Inc()
		l.log.Warn("cluster: undecodable forwarded message", "from", node, "err", err)
		return
	}
	l.deliver.DeliverForwarded(m, direct, groups)
}
