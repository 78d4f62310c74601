// Package session owns one MQTT client's state and the driver of its current
// connection.
//
// A Session is the state the MQTT specifications say outlives a connection:
// the subscriptions the client holds, its outbound queue and in-flight
// window, packet identifiers, inbound QoS 2 identifiers awaiting PUBREL, and
// its will. A Conn is one network connection bound to a Session: a reader
// goroutine that decodes and handles packets, and the holder of its writer
// role, the one party that writes its socket at a time (writer.go). The role
// goes to a reader's batch when a connection has something to send and its
// socket is idle: the reader that caused it (a publisher's, or the
// connection's own) writes it inline, without blocking, once it has handled
// every packet of its read (batch.go). It goes to the connection's writer
// goroutine when the socket is full, under load, and on TLS and WebSocket
// connections; that goroutine blocks on the socket, batches, lingers briefly
// once idle and then exits, so an idle connection keeps no writer.
//
// Sequenced topics: a session keeps a cursor per placement group
// (cursor.go), through which live and replayed records of the group pass,
// so that it takes each at most once and in order; a persistent session's
// backlog on a group is its cursor, written to the store with the
// deliveries that move it (storeCursorLocked), so that a crash of the node
// does not replay what the session took. SubRequest.From carries a SUBSCRIBE's
// sx-from (from.go).
//
// Concurrency: a Session's mutable state sits under Session.mu; Conn fields
// that the reader, the writer and publishers share are under the same lock.
// Deliver is called by the broker from publishers' goroutines, with the
// publishing session in Persist.From. The package calls the broker only
// through the Hub interface, never while holding Session.mu, and the broker
// never holds its own locks while calling into a session in a way that
// could call back (see docs/design/broker.md). A batch's lock is taken
// under a session's lock, never the other way round.
//
// Security: a Conn asks Env.Auth (an Authenticator, nil for none) who the
// client is at CONNECT, after a listener's connection-rate mark (CONNACK
// 0x9F) and before Hub.Attach; refusals wait Limits.AuthFailDelay. The
// Authorizer it gets back (nil: no access control, $SYS/ closed) decides
// PUBLISH, SUBSCRIBE and each delivery as it leaves the queue. The reader
// applies the per-client publish rate and bytes limits on Env.Clock, pausing
// itself or disconnecting.
//
// It must not touch the subscription index, retained messages or other
// sessions: those belong to the broker.
package session
