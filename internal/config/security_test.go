package config

import (
	"strings"
	"testing"
)

func TestAnonymousAuto(t *testing.T) {
	c := Default()
	if !c.AnonymousAllowed() {
		t.Fatal("the zero-config loopback start must accept anonymous clients")
	}
	for _, a := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1", "127.0.0.2:1"} {
		if !IsLoopback(a) {
			t.Errorf("%s is loopback", a)
		}
	}
	for _, a := range []string{":1883", "0.0.0.0:1883", "[::]:1883", "10.0.0.1:1883", "example.com:1883", "nonsense"} {
		if IsLoopback(a) {
			t.Errorf("%s is not loopback", a)
		}
	}
	c.MQTTSAddr = "0.0.0.0:8883"
	if c.AnonymousAllowed() {
		t.Fatal("auto allowed anonymous clients with a listener on every interface")
	}
	c.AllowAnonymous = "true"
	if !c.AnonymousAllowed() {
		t.Fatal("allow-anonymous true")
	}
	c = Default()
	c.AllowAnonymous = "false"
	if c.AnonymousAllowed() {
		t.Fatal("allow-anonymous false")
	}
}

func TestValidateSecurity(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" : valid
	}{
		{"public listener without any authentication", func(c *Config) { c.MQTTAddr = "0.0.0.0:1883" }, "allow-anonymous"},
		{"public listener with a password file", func(c *Config) { c.MQTTAddr = "0.0.0.0:1883"; c.PasswordFile = "p" }, ""},
		{"public listener, anonymous on purpose", func(c *Config) { c.MQTTAddr = "0.0.0.0:1883"; c.AllowAnonymous = "true" }, ""},
		{"anonymous off, nothing else", func(c *Config) { c.AllowAnonymous = "false" }, "allow-anonymous"},
		{"mqtts without a certificate", func(c *Config) { c.MQTTSAddr = "127.0.0.1:8883" }, "tls-cert"},
		{"mqtts with a certificate", func(c *Config) { c.MQTTSAddr = "127.0.0.1:8883"; c.TLSCert, c.TLSKey = "c", "k" }, ""},
		{"certificate without key", func(c *Config) { c.TLSCert = "c" }, "tls-key"},
		{"client auth without CA", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSClientAuth = "c", "k", "require" }, "tls-ca"},
		{"identity without client auth", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSIdentity = "c", "k", "cn" }, "tls-identity"},
		{"certificate identity as the only authentication", func(c *Config) {
			c.MQTTAddr, c.WSAddr, c.MQTTSAddr = "", "", "0.0.0.0:8883"
			c.TLSCert, c.TLSKey, c.TLSCA, c.TLSClientAuth, c.TLSIdentity = "c", "k", "ca", "require", "cn"
		}, ""},
		{"public admin API without a token", func(c *Config) { c.AdminAddr = "0.0.0.0:8088" }, "admin-token"},
		{"public admin API with a token", func(c *Config) { c.AdminAddr = "0.0.0.0:8088"; c.AdminToken = strings.Repeat("t", 32) }, ""},
		{"public admin API with a token file", func(c *Config) { c.AdminAddr = "0.0.0.0:8088"; c.AdminTokenFile = "f" }, ""},
		{"token and token file", func(c *Config) { c.AdminToken, c.AdminTokenFile = strings.Repeat("t", 32), "f" }, "admin-token"},
		{"short token", func(c *Config) { c.AdminToken = "secret" }, "admin-token"},
		{"read token equal to admin token", func(c *Config) { c.AdminToken = strings.Repeat("t", 32); c.AdminReadToken = c.AdminToken }, "admin-read-token"},
		{"negative limit", func(c *Config) { c.PublishRate = -1 }, "publish-rate"},
		{"bad limit action", func(c *Config) { c.PublishLimit = "ignore" }, "publish-limit-action"},
	}
	for _, tc := range cases {
		c := Default()
		tc.edit(&c)
		err := c.Validate()
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("%s: error %v does not name %s", tc.name, err, tc.field)
		}
	}
}
