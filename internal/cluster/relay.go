package cluster

import (
	"encoding/binary"
	"fmt"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/message"
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

// Relays delivers relayed deliveries to a session that moved here (the
// broker).
type Relays interface {
	DeliverRelayed(clientID string, ds []broker.Relayed) int
}

var (
	_ Relays       = (*broker.Broker)(nil)
	_ broker.Relay = (*Layer)(nil)
)

// Relay implements broker.Relay: it queues ds for node on its link's
// control queue. Deliveries that find no link, or a full queue, are lost
// and counted (sextant_cluster_relay_dropped_total), as forwarded messages
// are when a link is down.
func (l *Layer) Relay(node, clientID string, ds []broker.Relayed) {
	ds = l.notForwarded(node, ds)
	for len(ds) > 0 {
		var items []byte
		n := 0
		for n < len(ds) && (n == 0 || len(items) < relayBatchBytes) {
			items = appendRelayed(items, ds[n])
			n++
		}
		body := binary.AppendUvarint(appendRelayHeader(nil, clientID), uint64(n))
		body = append(body, items...)
		if !l.peers.Notify(node, methodRelay, body) {
			l.metrics.relayDropped.Add(float64(n))
			l.log.Warn("cluster: could not relay a moved session's messages to its new node", "client", clientID, "node", node, "messages", n)
		} else {
			l.metrics.relayed.Add(float64(n))
		}
		ds = ds[n:]
	}
}

// notForwarded leaves out the deliveries of messages published here that
// Forward sends to node anyway (node's interest matches them directly): the
// new node delivers those to the session itself.
func (l *Layer) notForwarded(node string, ds []broker.Relayed) []broker.Relayed {
	out := ds[:0:0]
	for _, d := range ds {
		if d.Shared == "" && d.Msg.Origin == l.id && l.routes.DirectTo(d.Msg.Topic, node) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// relayed delivers a relay notification from node.
func (l *Layer) relayed(node string, body []byte) error {
	clientID, ds, err := decodeRelay(body)
	if err != nil {
		l.metrics.corrupt.Inc()
		return err
	}
	if got := l.relays.DeliverRelayed(clientID, ds); got < len(ds) {
		l.log.Info("cluster: relayed messages for a session no longer here were dropped", "client", clientID, "from", node, "messages", len(ds)-got)
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
	d := wire.NewDecoder(b)
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
		if mb := d.Bytes(); !d.Failed() {
			m, err := message.Decode(mb)
			if err != nil {
				d.Fail()
			}
			r.Msg = m
		}
		out = append(out, r)
	}
	if err := d.Finish(); err != nil {
		return "", nil, fmt.Errorf("%w: relay: %w", ErrCorrupt, err)
	}
	return clientID, out, nil
}
