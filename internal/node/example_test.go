package node_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/auth"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/tlstest"
)

// TestSecureExampleConfig: the secure configuration shown in the README and
// docs/security.md is docs/examples/secure.yaml, verbatim; it validates and
// is secure (no plaintext MQTT, no anonymous clients, ACL, admin API over
// TLS with a token); and a node runs it, with its file paths pointed at
// generated files and its ACL the real docs/examples/acl.yaml, enforcing
// what the documentation says.
func TestSecureExampleConfig(t *testing.T) {
	const root = "../.."
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	secure, acl := read("docs/examples/secure.yaml"), read("docs/examples/acl.yaml")
	for doc, files := range map[string][]string{"README.md": {secure}, "docs/security.md": {secure, acl}} {
		text := read(doc)
		for _, f := range files {
			if !strings.Contains(text, "```yaml\n"+f+"```\n") {
				t.Errorf("%s does not show the example file verbatim:\n%s", doc, f)
			}
		}
	}

	cfg := config.Default()
	if err := config.Load(filepath.Join(root, "docs/examples/secure.yaml"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
	if cfg.MQTTAddr != "" || cfg.WSAddr != "" || cfg.AnonymousAllowed() || cfg.ACLFile == "" || cfg.PasswordFile == "" ||
		!cfg.AdminTLS || cfg.AdminTokenFile == "" || cfg.TLSClientAuth == "none" || cfg.TLSIdentity == "none" {
		t.Fatalf("the example is not the secure configuration it claims: %+v", cfg)
	}
	if _, err := auth.LoadACL(filepath.Join(root, "docs/examples/acl.yaml")); err != nil {
		t.Fatal(err)
	}

	ca := tlstest.NewCA(t, "devices")
	srv := ca.Server("server")
	const token = "example-admin-token-0123456789"
	cfg.DataDir, cfg.NodeID, cfg.Fsync, cfg.SysInterval = t.TempDir(), "example", "never", 50*time.Millisecond
	cfg.MQTTSAddr, cfg.WSSAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = srv.CertFile, srv.KeyFile, ca.CertFile
	cfg.PasswordFile = writeFile(t, "passwd", passwords(t, "ops", "ops-pw", "game-server", "gs-pw"))
	cfg.ACLFile = filepath.Join(root, "docs/examples/acl.yaml")
	cfg.AdminTokenFile = writeFile(t, "admin-token", token+"\n")
	cfg.AuthFailDelay = 0
	n := brokertest.Start(t, cfg)

	drone := connectOK(t, rawTLS(t, n, ca.ClientConfig(ca.Client("drone-7", tlstest.Options{})), packet.V5), login(packet.V5, "d7", "", ""))
	if sa := drone.Subscribe(1, sub("drones/drone-7/cmd/#", 1), sub("drones/drone-8/#", 1)); sa.Codes[0] != packet.GrantedQoS1 || sa.Codes[1] != packet.NotAuthorized {
		t.Fatalf("drone SUBACK %v", sa.Codes)
	}
	for i, c := range []struct {
		topic string
		ok    bool
	}{{"drones/drone-7/telemetry", true}, {"drones/drone-8/telemetry", false}, {"drones/drone-7/cmd/land", false}, {"presence/drone-7", true}} {
		drone.Send(pub(c.topic, 1, uint16(i+1), "x"))
		if got := drone.ExpectAck(packet.PUBACK, uint16(i+1)).ReasonCode; got.IsError() == c.ok {
			t.Errorf("drone publishing to %s: %v", c.topic, got)
		}
	}
	ops := connectOK(t, rawTLS(t, n, ca.ClientConfig(nil), packet.V5), login(packet.V5, "console", "ops", "ops-pw"))
	ops.Send(pub("drones/drone-7/cmd/land", 1, 1, "land now"))
	ops.ExpectAck(packet.PUBACK, 1)
	drone.ExpectPublish("drones/drone-7/cmd/land", "land now")
	if sa := ops.Subscribe(1, sub("$SYS/broker/version", 0)); sa.Codes[0] != packet.GrantedQoS0 {
		t.Fatalf("ops $SYS: %v", sa.Codes)
	}
	if got := refused(t, rawTLS(t, n, ca.ClientConfig(nil), packet.V5), login(packet.V5, "anon", "", "")); got != packet.NotAuthorized {
		t.Fatalf("anonymous: %v", got)
	}
	if got := refused(t, rawTLS(t, n, ca.ClientConfig(nil), packet.V5), login(packet.V5, "guess", "ops", "guess")); got != packet.BadUserNameOrPassword {
		t.Fatalf("wrong password: %v", got)
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(nil)}, Timeout: 5 * time.Second}
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {token, 200}} {
		req, _ := http.NewRequest("GET", "https://"+n.Addr("admin")+"/v1/status", nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("admin API with token %q: %d, want %d", c.token, res.StatusCode, c.want)
		}
	}
}
