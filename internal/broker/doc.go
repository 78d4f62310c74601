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
// Concurrency: the session registry and timers sit under Broker.mu; the
// subscription index under its own RWMutex (Match under the read lock). The
// broker never holds either lock while calling into a session that could
// call back into the broker. It must not read or write sockets: that is the
// session's job.
package broker
