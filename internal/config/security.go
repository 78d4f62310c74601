package config

import (
	"net"
)

// minTokenLength is the shortest admin API token accepted.
const minTokenLength = 16

// ClientListeners returns the configured MQTT listener addresses (TCP,
// WebSocket, and their TLS variants).
func (c *Config) ClientListeners() []string {
	var out []string
	for _, a := range []string{c.MQTTAddr, c.WSAddr, c.MQTTSAddr, c.WSSAddr} {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

// IsLoopback reports whether the listen address addr binds a loopback
// address only ("127.0.0.1:1883", "[::1]:1883", "localhost:1883"). An empty
// host binds every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AnonymousAllowed resolves allow-anonymous: "auto" allows clients without
// an identity only when every client listener is on loopback.
func (c *Config) AnonymousAllowed() bool {
	switch c.AllowAnonymous {
	case "true":
		return true
	case "false":
		return false
	}
	for _, a := range c.ClientListeners() {
		if !IsLoopback(a) {
			return false
		}
	}
	return true
}

// TLSNeeded reports whether any listener serves TLS.
func (c *Config) TLSNeeded() bool { return c.MQTTSAddr != "" || c.WSSAddr != "" || c.AdminTLS }

// validateSecurity checks the TLS, authentication and admin API settings.
func (c *Config) validateSecurity(bad func(field, format string, args ...any)) {
	if c.TLSNeeded() && (c.TLSCert == "" || c.TLSKey == "") {
		bad("tls-cert", "mqtts-addr, wss-addr and admin-tls need tls-cert and tls-key")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		bad("tls-key", "tls-cert and tls-key go together")
	}
	if c.TLSClientAuth != "none" && c.TLSCA == "" {
		bad("tls-ca", "tls-client-auth %s needs tls-ca, the CA client certificates are verified against", c.TLSClientAuth)
	}
	if c.TLSIdentity != "none" && c.TLSClientAuth == "none" {
		bad("tls-identity", "identifying clients by certificate needs tls-client-auth request or require")
	}
	if !c.AnonymousAllowed() && c.PasswordFile == "" && c.TLSIdentity == "none" {
		why := "allow-anonymous is false"
		if c.AllowAnonymous == "auto" {
			why = "a client listener is not on loopback, so allow-anonymous auto refuses anonymous clients"
		}
		bad("allow-anonymous", "%s, and neither password-file nor tls-identity is set: no client could connect. "+
			"Set password-file (see sextant passwd), or allow-anonymous: true to accept anyone", why)
	}
	if c.AdminToken != "" && c.AdminTokenFile != "" {
		bad("admin-token", "set admin-token or admin-token-file, not both")
	}
	if c.AdminAddr != "" && !IsLoopback(c.AdminAddr) && c.AdminToken == "" && c.AdminTokenFile == "" {
		bad("admin-token", "admin-addr %s is not on loopback: set admin-token or admin-token-file (or bind the admin API to 127.0.0.1)", c.AdminAddr)
	}
	for _, t := range []struct{ name, v string }{{"admin-token", c.AdminToken}, {"admin-read-token", c.AdminReadToken}} {
		if t.v != "" && len(t.v) < minTokenLength {
			bad(t.name, "shorter than %d characters", minTokenLength)
		}
	}
	if c.AdminReadToken != "" && c.AdminReadToken == c.AdminToken {
		bad("admin-read-token", "must differ from admin-token")
	}
}
