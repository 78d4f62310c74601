// Package tlstest makes certificates at test time: a CA, server certificates
// for loopback addresses and client certificates, written as PEM files into
// a test's temporary directory, with the tls.Config values a test client
// needs. Nothing is committed to the tree and nothing outlives the test.
// It is imported only by tests.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	T        testing.TB
	Cert     *x509.Certificate
	Key      *ecdsa.PrivateKey
	CertFile string // PEM of Cert
	dir      string
	serial   atomic.Int64
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	ca := &CA{T: t, Key: key, dir: t.TempDir()}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	ca.serial.Store(1)
	ca.Cert = ca.sign(tmpl, tmpl, key)
	ca.CertFile = ca.writePEM(name+"-ca.pem", "CERTIFICATE", ca.Cert.Raw)
	return ca
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (ca *CA) sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey) *x509.Certificate {
	ca.T.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, ca.Key)
	if err != nil {
		ca.T.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		ca.T.Fatal(err)
	}
	return c
}

func (ca *CA) writePEM(name, typ string, der []byte) string {
	ca.T.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.T.Fatal(err)
	}
	return p
}

// Leaf is a certificate the CA issued, with its key, as files and in memory.
type Leaf struct {
	Cert     *x509.Certificate
	CertFile string
	KeyFile  string
	Pair     tls.Certificate
}

// Options shape a leaf certificate.
type Options struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	Emails     []string
	NotBefore  time.Time // zero: an hour ago
	NotAfter   time.Time // zero: a day from now
	Client     bool      // client authentication instead of server
}

// Issue makes a certificate and key; files are named after name.
func (ca *CA) Issue(name string, o Options) *Leaf {
	ca.T.Helper()
	key := newKey(ca.T)
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if o.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: o.CommonName},
		DNSNames: o.DNSNames, IPAddresses: o.IPs, EmailAddresses: o.Emails,
		NotBefore: o.NotBefore, NotAfter: o.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	cert := ca.sign(tmpl, ca.Cert, key)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.T.Fatal(err)
	}
	l := &Leaf{Cert: cert}
	l.CertFile = ca.writePEM(name+".pem", "CERTIFICATE", cert.Raw)
	l.KeyFile = ca.writePEM(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	l.Pair = tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
	return l
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(name string) *Leaf {
	ca.T.Helper()
	return ca.Issue(name, Options{CommonName: name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}})
}

// Client issues a client certificate with common name cn.
func (ca *CA) Client(cn string, o Options) *Leaf {
	ca.T.Helper()
	o.CommonName, o.Client = cn, true
	return ca.Issue(cn, o)
}

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ClientConfig is a TLS client configuration trusting ca, presenting leaf
// (nil: no client certificate).
func (ca *CA) ClientConfig(leaf *Leaf) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if leaf != nil {
		c.Certificates = []tls.Certificate{leaf.Pair}
	}
	return c
}
