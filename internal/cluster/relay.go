package cluster

import (
	"encoding/binary"

	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/router"
	"github.com/sextantmq/sextant/internal/wire"
)

// methodRelay (notification) carries, from a session's old node to its new
// one, the deliveries that reached the old copy after its export: the
// last queued messages at release, then what its lingering subscriptions
// catch for broker.RelayGrace (docs/design/cluster.md, "Session directory").
const methodRelay byte = 11

// relayBatchBytes bounds one relay notification; a longer residue goes in
// several, in order.
const relayBatchBytes = 1 << 20

var _ broker.Relay = (*Cluster)(nil)

// Relay implements broker.Relay: it queues ds for node on its link's
// control queue. Deliveries that find no link, or a full queue, are lost
// and counted (sextant_cluster_relay_dropped_total), as forwarded messages
// are when a link is down.
func (c *Cluster) Relay(node, clientID string, ds []broker.Relayed) {
	ds = c.notForwarded(node, ds)
	l := c.peers.Link(node)
	for len(ds) > 0 {
		var items []byte
		n := 0
		for n < len(ds) && (n == 0 || len(items) < relayBatchBytes) {
			items = appendRelayed(items, ds[n])
			n++
		}
		body := binary.AppendUvarint(appendRelayHeader(nil, clientID), uint64(n))
		body = append(body, items...)
		if l == nil || !l.Notify(methodRelay, body) {
			c.metrics.relayDropped.Add(float64(n))
			c.log.Warn("cluster: could not relay a moved session's messages to its new node", "client", clientID, "node", node, "messages", n)
		} else {
			c.metrics.relayed.Add(float64(n))
		}
		ds = ds[n:]
	}
}

// notForwarded leaves out the deliveries of messages published here that
// Forward sends to node anyway (node's interest matches them): the new
// node delivers those to the session directly.
func (c *Cluster) notForwarded(node string, ds []broker.Relayed) []broker.Relayed {
	out := ds[:0:0]
	ms := c.matches.Get().(*router.Matches[string])
	defer c.matches.Put(ms)
	for _, d := range ds {
		if d.Shared == "" && d.Msg.Origin == c.id {
			c.remote.RLock()
			c.remote.ix.Match(d.Msg.Topic, "", ms)
			c.remote.RUnlock()
			if slices.ContainsFunc(ms.Direct, func(m router.Delivery[string]) bool { return m.Sub == node }) {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

// relayed delivers a relay notification from node.
func (c *Cluster) relayed(node string, body []byte) error {
	clientID, ds, err := decodeRelay(body)
	if err != nil {
		c.metrics.corrupt.Inc()
		return err
	}
	if got := c.b.DeliverRelayed(clientID, ds); got < len(ds) {
		c.log.Info("cluster: relayed messages for a session no longer here were dropped", "client", clientID, "from", node, "messages", len(ds)-got)
	}
	return nil
}

func appendRelayHeader(dst []byte, clientID string) []byte { return wire.AppendString(dst, clientID) }

const (
	relayFlagRetain = 1 << 0
)

func appendRelayed(dst []byte, d broker.Relayed) []byte {
	var f byte
	if d.Retain {
		f |= relayFlagRetain
	}
	dst = append(dst, f, d.QoS)
	dst = binary.AppendUvarint(dst, uint64(len(d.IDs)))
	for _, id := range d.IDs {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	dst = wire.AppendString(dst, d.Shared)
	return wire.AppendBytes(dst, message.Append(nil, d.Msg))
}

// decodeRelay decodes a relay notification: the client id, then the
// deliveries.
func decodeRelay(b []byte) (string, []broker.Relayed, error) {
	d := newDecoder(b)
	clientID := d.Str()
	n := d.Count(4)
	var out []broker.Relayed
	for i := 0; i < n && !d.Failed(); i++ {
		f, qos := d.Byte(), d.Byte()
		if f&^relayFlagRetain != 0 || qos > 2 {
			d.Fail()
		}
		r := broker.Relayed{QoS: qos, Retain: f&relayFlagRetain != 0}
		ids := d.Count(1)
		for j := 0; j < ids && !d.Failed(); j++ {
			r.IDs = append(r.IDs, d.Uint32())
		}
		r.Shared = d.Str()
		r.Msg = d.message()
		out = append(out, r)
	}
	if err := d.finish("relay"); err != nil {
		return "", nil, err
	}
	return clientID, out, nil
}

// relayMetrics are the relay's counters, registered with the others.
func relayMetrics(r prometheus.Registerer) (relayed, dropped prometheus.Counter) {
	relayed = prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_relayed_total",
		Help: "Deliveries for sessions that moved away, relayed from this node to their new node."})
	dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "sextant_cluster_relay_dropped_total",
		Help: "Deliveries for sessions that moved away that could not be relayed (no link, or its queue full)."})
	for _, c := range []prometheus.Collector{relayed, dropped} {
		_ = r.Register(c)
	}
	return relayed, dropped
}
