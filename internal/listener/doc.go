// Package listener owns the client-facing accept loops: MQTT over TCP and MQTT
// over WebSocket (path /mqtt, subprotocol "mqtt"). It turns each accepted
// connection into a net.Conn handed to a Handler on its own goroutine, and
// it tracks those goroutines so Close can wait for them.
//
// It knows nothing of MQTT: limits that need the protocol (max connections,
// CONNECT timeout) are the handler's. It must not hold references to sessions.
package listener
