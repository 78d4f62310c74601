// Package listener owns the client-facing accept loops: MQTT over TCP and
// over WebSocket (path /mqtt, subprotocol "mqtt"), each optionally over TLS
// (Certificates: a certificate, key and client CA reloaded without dropping
// connections, TLS 1.2 or later, optional client certificates), and the
// per-address limits applied at accept (IPLimiter: simultaneous connections
// and connection rate per IP address, IPv6 per /64). It turns each accepted
// connection into a net.Conn handed to a Handler on its own goroutine, and
// it tracks those goroutines so Close can wait for them.
//
// It knows nothing of MQTT: limits that need the protocol (max connections,
// CONNECT timeout, refusing a CONNECT over the rate with 0x9F) are the
// handler's; a connection over the rate is only marked (its
// ConnectRateExceeded method, reachable through NetConn from a TLS or
// WebSocket connection). It must not hold references to sessions.
package listener
