package listener

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// ErrTLSFiles is wrapped by every error about a certificate, key or CA file.
var ErrTLSFiles = errors.New("listener: bad TLS file")

// TLSFiles name the PEM files of the TLS listeners.
type TLSFiles struct {
	Cert string // certificate, followed by its intermediates
	Key  string
	CA   string // CAs that client certificates are verified against; "" for none
	// ClientAuth applies to the MQTT listeners (tls.NoClientCert,
	// tls.VerifyClientCertIfGiven or tls.RequireAndVerifyClientCert).
	ClientAuth tls.ClientAuthType
}

// Certificates holds the TLS listeners' certificate, key and client CAs, and
// swaps them on Reload. A handshake uses what is current when it starts;
// established connections are not affected by a reload.
type Certificates struct {
	files TLSFiles
	clock clock.Clock
	cur   atomic.Pointer[certState]
}

type certState struct {
	mqtt, admin *tls.Config
	notAfter    time.Time
}

// LoadCertificates reads the files; an error names the file at fault.
func LoadCertificates(f TLSFiles, clk clock.Clock) (*Certificates, error) {
	c := &Certificates{files: f, clock: clk}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again and, if they are valid, uses them for new
// handshakes. On error the previous certificates stay in use.
func (c *Certificates) Reload() error {
	f := c.files
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return fmt.Errorf("%w: tls-cert: %w", ErrTLSFiles, err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return fmt.Errorf("%w: tls-key: %w", ErrTLSFiles, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%w: tls-cert %s with tls-key %s: %w", ErrTLSFiles, f.Cert, f.Key, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("%w: tls-cert %s: %w", ErrTLSFiles, f.Cert, err)
	}
	if now := c.clock.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return fmt.Errorf("%w: tls-cert %s is valid from %s to %s, not now", ErrTLSFiles, f.Cert,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	var pool *x509.CertPool
	if f.CA != "" {
		caPEM, err := os.ReadFile(f.CA)
		if err != nil {
			return fmt.Errorf("%w: tls-ca: %w", ErrTLSFiles, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return fmt.Errorf("%w: tls-ca %s: no PEM certificate in it", ErrTLSFiles, f.CA)
		}
	}
	st := &certState{
		mqtt: &tls.Config{
			MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
			ClientCAs: pool, ClientAuth: f.ClientAuth,
		},
		admin:    &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}},
		notAfter: leaf.NotAfter,
	}
	c.cur.Store(st)
	return nil
}

// NotAfter is when the current certificate expires.
func (c *Certificates) NotAfter() time.Time { return c.cur.Load().notAfter }

// MQTTConfig is the server configuration of the MQTT TLS listeners (TLS 1.2
// or later, client certificates as configured), following reloads.
func (c *Certificates) MQTTConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cur.Load().mqtt, nil
		},
	}
}

// AdminConfig is the server configuration of the admin API over TLS: the
// same certificate, no client certificates (the API has bearer tokens).
func (c *Certificates) AdminConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cur.Load().admin, nil
		},
	}
}
