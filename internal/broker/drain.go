package broker

import (
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
)

// DisconnectAll ends every client connection, as a node being drained
// does: MQTT 5 clients get DISCONNECT with code (Use Another Server, Server
// Moved or Server Shutting Down) and reason, 3.1.1 clients are closed. The
// broker keeps running: persistent sessions stay here, offline, until their
// clients connect to another node, which takes them over. It returns the
// number of connections asked to end and does not wait for them.
func (b *Broker) DisconnectAll(code packet.ReasonCode, reason string) int {
	b.mu.Lock()
	var conns []*session.Conn
	for _, s := range b.mu.sessions {
		if c := s.Conn(); c != nil {
			conns = append(conns, c)
		}
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.Disconnect(code, reason)
	}
	return len(conns)
}
