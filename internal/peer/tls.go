package peer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// ClusterTLS is a node's mutual-TLS identity for peer links and the
// metadata group: its certificate and key, and the cluster's CA. One
// configuration (Config) serves both sides: accepted connections must
// present a client certificate signed by the CA, and dialled ones a server
// certificate signed by it. Peers are authenticated as holders of a
// certificate from the cluster CA; host names are not checked, since nodes
// are dialled by the address they advertise. Reload swaps the files in for
// new handshakes; established connections keep what they negotiated.
type ClusterTLS struct {
	caFile, certFile, keyFile string
	cur                       atomic.Pointer[tlsState]
}

type tlsState struct {
	ca   *x509.CertPool
	cert tls.Certificate
}

// LoadTLS reads the PEM files: the cluster CA, this node's certificate and
// its key.
func LoadTLS(caFile, certFile, keyFile string) (*ClusterTLS, error) {
	t := &ClusterTLS{caFile: caFile, certFile: certFile, keyFile: keyFile}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the files again; on error the previous ones stay in use.
func (t *ClusterTLS) Reload() error {
	pem, err := os.ReadFile(t.caFile)
	if err != nil {
		return fmt.Errorf("peer: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%w: no certificate in CA file %s", ErrConfig, t.caFile)
	}
	cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
	if err != nil {
		return fmt.Errorf("peer: load certificate: %w", err)
	}
	t.cur.Store(&tlsState{ca: pool, cert: cert})
	return nil
}

// Config is the TLS configuration for both sides of a connection, following
// reloads.
func (t *ClusterTLS) Config() *tls.Config { return config(t.cur.Load) }

// TLSConfig is a fixed configuration for a CA pool and certificate already
// in memory (tests).
func TLSConfig(ca *x509.CertPool, cert tls.Certificate) *tls.Config {
	st := &tlsState{ca: ca, cert: cert}
	return config(func() *tlsState { return st })
}

func config(cur func() *tlsState) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &cur().cert, nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cur().cert, nil
		},
		// VerifyConnection checks the chain for both sides, with any key
		// usage, so one node certificate serves to accept and to dial.
		ClientAuth: tls.RequireAnyClientCert,
		// The chain is verified below against the CA, without a host name.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("peer: no certificate presented")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: cur().ca, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
			})
			if err != nil {
				return fmt.Errorf("peer: certificate not signed by the cluster CA: %w", err)
			}
			return nil
		},
	}
}
