// Package membership owns a node's view of the cluster: which nodes exist,
// whether each is alive, failed or has left, the labels each one
// announces (site, zone, tier and its MQTT, admin and peer addresses), and
// network coordinates. It wraps HashiCorp Serf (gossip over memberlist, SWIM
// failure detection, Vivaldi coordinates computed from the gossip probes'
// round-trip times); nothing else in Sextant imports Serf or memberlist.
//
// Labels travel as Serf tags. Coordinates are enabled: every probe updates the
// local node's coordinate, and the coordinates other nodes piggyback on their
// acks are cached, so EstimateRTT answers for any two members without a
// probe of its own.
//
// Gossip can run over real UDP/TCP sockets (memberlist's own transport, the
// default) or over any net.PacketConn plus net.Listener and a dial function
// (NewTransport); tests use the latter with package memnet, so gossip and
// Vivaldi probes see emulated latency, loss and partitions, inside a
// testing/synctest bubble.
//
// Each change of another member is logged once (join, leave, failure,
// removal), and Serf's and memberlist's own lines pass through
// logging.StdLog. With Config.KnownFile the members seen are remembered in
// a file (LoadKnown reads it), so that a restarted node can rejoin them
// whatever its join list.
//
// Concurrency: a Membership is safe for concurrent use. It owns one goroutine
// that turns Serf's events into Events; Shutdown stops it. Events is bounded:
// when the consumer falls behind, events are dropped and counted, and the next
// event delivered is EventResync, telling the consumer to re-read Members.
//
// This package must not import the broker's packages or the metadata group:
// the node composes them.
package membership
