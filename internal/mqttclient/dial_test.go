package mqttclient_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
	"github.com/sextantmq/sextant/internal/mqttclient/mqttclienttest"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		in   string
		want mqttclient.Endpoint
		bad  bool
	}{
		{in: "localhost", want: mqttclient.Endpoint{Scheme: "mqtt", Host: "localhost:1883"}},
		{in: "127.0.0.1:1884", want: mqttclient.Endpoint{Scheme: "mqtt", Host: "127.0.0.1:1884"}},
		{in: "mqtt://h:1", want: mqttclient.Endpoint{Scheme: "mqtt", Host: "h:1"}},
		{in: "tcp://h", want: mqttclient.Endpoint{Scheme: "mqtt", Host: "h:1883"}},
		{in: "mqtts://h", want: mqttclient.Endpoint{Scheme: "mqtts", Host: "h:8883"}},
		{in: "ssl://h:9", want: mqttclient.Endpoint{Scheme: "mqtts", Host: "h:9"}},
		{in: "ws://h:8083", want: mqttclient.Endpoint{Scheme: "ws", Host: "h:8083", Path: "/mqtt"}},
		{in: "wss://h/x/y", want: mqttclient.Endpoint{Scheme: "wss", Host: "h:443", Path: "/x/y"}},
		{in: "mqtt://[::1]:5", want: mqttclient.Endpoint{Scheme: "mqtt", Host: "[::1]:5"}},
		{in: "http://h", bad: true},
		{in: "mqtt://", bad: true},
		{in: "mqtt://h:0", bad: true},
		{in: "mqtt://h:99999", bad: true},
		{in: "mqtt://h/path", bad: true},
	}
	for _, c := range cases {
		got, err := mqttclient.ParseURL(c.in)
		if c.bad {
			if !errors.Is(err, mqttclient.ErrBadURL) {
				t.Errorf("%q: got %+v, %v; want ErrBadURL", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// writeCerts writes a CA and a server certificate for 127.0.0.1 and
// returns their paths and the CA pool.
func writeCerts(t *testing.T) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der),
		write("server.key", "EC PRIVATE KEY", keyDER), pool
}

func TestTLSAgainstMosquitto(t *testing.T) {
	if _, ok := mqttclienttest.MosquittoBinary(t); !ok {
		t.Skip("mosquitto missing")
	}
	_, cert, key, pool := writeCerts(t)
	m := mqttclienttest.StartMosquitto(t, "certfile "+cert, "keyfile "+key)
	in := make(inbox, 10)
	c := dial(t, "mqtts://"+m.Addr(), mqttclient.Options{ClientID: "tls", OnPublish: in.handler(),
		TLS: &tls.Config{RootCAs: pool}})
	subscribe(t, c, "tls/t", 1)
	if err := c.Publish(ctxT(t), &packet.Publish{Topic: "tls/t", QoS: 1, Payload: []byte("secret")}); err != nil {
		t.Fatal(err)
	}
	if m := in.next(t); m.payload != "secret" {
		t.Fatalf("got %+v", m)
	}
	// Without the CA the handshake fails with a certificate error.
	_, err := mqttclient.Dial(ctxT(t), "mqtts://"+m.Addr(), mqttclient.Options{ClientID: "tls2"})
	if err == nil {
		t.Fatal("TLS connection without the CA succeeded")
	}
}
