package peer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// LoadTLS builds the mutual-TLS configuration for peer links from PEM
// files: this node's certificate and key, and the cluster's CA. The same
// configuration serves both sides: accepted connections must present a
// client certificate signed by the CA, and dialled ones must present a
// server certificate signed by it. Peers are authenticated as holders of a
// certificate from the cluster CA; host names are not checked, since nodes
// are dialled by the address they advertise.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("peer: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: no certificate in CA file %s", ErrConfig, caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("peer: load certificate: %w", err)
	}
	return TLSConfig(pool, cert), nil
}

// TLSConfig is LoadTLS for a CA pool and certificate already in memory.
func TLSConfig(ca *x509.CertPool, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		// VerifyConnection checks the chain for both sides, with any key
		// usage, so one node certificate serves to accept and to dial.
		ClientAuth: tls.RequireAnyClientCert,
		ClientCAs:  ca,
		RootCAs:    ca,
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
				Roots: ca, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
			})
			if err != nil {
				return fmt.Errorf("peer: certificate not signed by the cluster CA: %w", err)
			}
			return nil
		},
	}
}
