package brokertest

import (
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/logging/logtest"
)

// BuildSextant builds cmd/sextant into a temporary directory and returns the
// binary's path. Call it once per test: a build takes seconds.
func BuildSextant(t testing.TB) string {
	t.Helper()
	root := ModuleRoot(t)
	bin := filepath.Join(t.TempDir(), "sextant")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sextant")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("brokertest: go build ./cmd/sextant: %v\n%s", err, out)
	}
	return bin
}

// ModuleRoot returns the directory holding go.mod, above the test's
// working directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("brokertest: go.mod not found")
		}
		dir = parent
	}
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for a process that must keep its port across restarts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", FreePort(t, false, "127.0.0.1"))
}

// Ports FreePort picks from: below Linux's ephemeral range (32768-60999 by
// default), so that no outgoing connection of this or a concurrently running
// test binary takes the port between the check and the node's bind. A port
// from the kernel (":0") would come from that range and race with them.
const (
	freePortMin = 20000
	freePortMax = 32000
)

// handedOut holds the ports FreePort returned in this test binary: a port
// is free until its process binds it, so two calls in a row (a node's MQTT
// and admin ports) could otherwise return the same one, and the second
// listener then fails with "address already in use".
var handedOut struct {
	sync.Mutex
	ports map[string]bool
}

// FreePort returns a port that was free a moment ago for TCP (and UDP when
// udp is set: a cluster address carries gossip on both) on every host, and
// that it has not returned before in this test binary.
func FreePort(t testing.TB, udp bool, hosts ...string) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[string]bool{}
	}
	for range 200 {
		port := strconv.Itoa(freePortMin + rand.IntN(freePortMax-freePortMin))
		if !handedOut.ports[port] && portFree(port, udp, hosts) {
			handedOut.ports[port] = true
			return port
		}
	}
	t.Fatalf("brokertest: no port free on %v", hosts)
	return ""
}

func portFree(port string, udp bool, hosts []string) bool {
	for _, h := range hosts {
		a := net.JoinHostPort(h, port)
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return false
		}
		_ = ln.Close()
		if udp {
			pc, err := net.ListenPacket("udp", a)
			if err != nil {
				return false
			}
			_ = pc.Close()
		}
	}
	return true
}

// Process is a `sextant serve` child process.
type Process struct {
	T    testing.TB
	Cmd  *exec.Cmd
	Addr string // MQTT address

	out  *LockedBuffer
	done chan struct{}
}

// StartProcess runs `bin serve --mqtt-addr addr --ws-addr "" --admin-addr ""
// args...` and waits until it accepts MQTT connections. The process is
// killed when the test ends; its output is logged if the test failed.
func StartProcess(t testing.TB, bin, addr string, args ...string) *Process {
	t.Helper()
	argv := append([]string{"serve", "--mqtt-addr", addr, "--ws-addr", "", "--admin-addr", ""}, args...)
	p := &Process{T: t, Cmd: exec.Command(bin, argv...), Addr: addr, out: &LockedBuffer{}, done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.out, p.out
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("brokertest: start %s: %v", bin, err)
	}
	go func() { _ = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("sextant output:\n%s", p.out.String())
		}
	})
	Eventually(t, 20*time.Second, func() bool {
		select {
		case <-p.done:
			t.Fatalf("brokertest: sextant exited: %v\n%s", p.Cmd.ProcessState, p.out.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}, "sextant accepting MQTT connections on "+addr)
	return p
}

// Kill sends SIGKILL and waits for the process to exit (idempotent).
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM (graceful shutdown) and waits for the exit.
func (p *Process) Stop() {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.T.Errorf("brokertest: sextant did not stop on SIGTERM")
		p.Kill()
	}
}

// Output is what the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// LockedBuffer is an output buffer a test reads while a process or a
// command writes it.
type LockedBuffer = logtest.Buffer

// RequireTool returns the path of an external program a test needs. Outside
// CI a missing program skips the test with a message naming the package to
// install; in CI (CI=true) it fails the test.
func RequireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (install %s): %v", name, pkg, err)
		}
		t.Skipf("%s not found; install %s to run this test", name, pkg)
	}
	return p
}
