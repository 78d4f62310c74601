package mqttclienttest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Mosquitto is a mosquitto broker process started for a test.
type Mosquitto struct {
	addr string
	cmd  *exec.Cmd
}

// Addr is the broker's host:port.
func (m *Mosquitto) Addr() string { return m.addr }

// PID is the broker's process id.
func (m *Mosquitto) PID() int { return m.cmd.Process.Pid }

// StartMosquitto starts mosquitto on a free loopback port with anonymous
// access and TCP_NODELAY, plus extra config lines (each applied to the
// listener, so they may set TLS files), and stops it when the test ends.
// It skips the test when the binary is missing, unless CI=true, where it
// fails.
func StartMosquitto(t testing.TB, extra ...string) *Mosquitto {
	t.Helper()
	bin, ok := MosquittoBinary(t)
	if !ok {
		t.Skip("mosquitto not installed (apt-get install mosquitto); skipping the Mosquitto interop test")
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("mqttclienttest: free port: %v", err)
	}
	dir := t.TempDir()
	conf := []string{
		fmt.Sprintf("listener %d 127.0.0.1", port),
		"allow_anonymous true",
		"set_tcp_nodelay true",
		"persistence false",
		"max_queued_messages 100000",
		"log_dest stderr",
		"log_type error",
		"log_type warning",
		"log_type notice",
		"log_type information",
	}
	if os.Geteuid() == 0 {
		// Keep root rather than dropping to the mosquitto user, who cannot
		// read the test's private temporary directories.
		conf = append(conf, "user root")
	}
	conf = append(conf, extra...)
	path := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("mqttclienttest: start mosquitto: %v", err)
	}
	m := &Mosquitto{addr: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// mosquitto logs "... running" once its listeners are open.
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var log []string
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, " running") {
				ready <- nil
				_, _ = io.Copy(io.Discard, stderr)
				return
			}
			log = append(log, line)
		}
		ready <- fmt.Errorf("mosquitto exited before it was ready: %s", strings.Join(log, " | "))
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("mqttclienttest: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mqttclienttest: mosquitto not ready within 10s")
	}
	return m
}

// MosquittoBinary returns the path of the mosquitto binary. When it is
// missing it reports false, after logging why, or fails the test when
// CI=true (CI installs it).
func MosquittoBinary(t testing.TB) (string, bool) {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
			if _, serr := os.Stat(p); serr == nil {
				return p, true
			}
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("mqttclienttest: mosquitto not installed (apt-get install mosquitto): %v", err)
		}
		t.Logf("mosquitto not installed (apt-get install mosquitto): Mosquitto interop cases are skipped")
		return "", false
	}
	return bin, true
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
