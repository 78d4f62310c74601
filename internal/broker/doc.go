// Package broker owns a node's local MQTT hub: the registry of sessions
// (creation, takeover, expiry), the subscription index, retained messages,
// will messages, $SYS statistics, and the orchestration of durable writes
// around a publish. It implements session.Hub; listeners hand connections to
// ServeConn. Sessions move between nodes through the cluster layer
// (ExportSession, ReleaseSession, importing at Attach); a released session's
// subscriptions linger for RelayGrace, relaying what they catch to its new
// node (relay.go). DisconnectAll sends every client away when the node
// drains.
//
// A message reaches local sessions through one pair of functions, route
// (the recipients) and fanOut (the deliveries), for a local publish
// (Publish) and for a message another node forwarded here
// (DeliverForwarded) alike. The rest of the cluster is broker.Remote, set by
// SetRemote: the node id and four small interfaces defined here (Forwarder,
// Interest, Replicator, Directory) that the cluster layer implements; the
// files remote.go (what the broker asks of and answers to the cluster) and
// handover.go (moving sessions between nodes) hold that side.
//
// Sequenced topics (sequenced.go): Publish hands their publishes to the
// Sequencer (the sequenced publish path) instead of routing them; the
// delivery layer brings their records back in each group's order through
// DeliverSequenced (live) and ReplayTo (history), and is told of
// subscriptions and attaching sessions through Replays.
//
// Concurrency: the session registry and timers sit under Broker.mu; the
// subscription index under its own RWMutex (Match under the read lock). The
// broker never holds either lock while calling into a session that could
// call back into the broker, or into the cluster layer. Its calls into the
// store are bounded (storeWaitTimeout, and the broker's life, which ends if
// Close gives up). It must not read or write sockets: that is the session's
// job.
package broker
