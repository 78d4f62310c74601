package node_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/logging/logtest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// logTo returns a logger at info level writing to a buffer the test reads.
func logTo() (*slog.Logger, *logtest.Buffer) { return logtest.New(slog.LevelInfo) }

// waitLogLine waits for a line of buf containing every part, and returns it.
func waitLogLine(t *testing.T, buf *logtest.Buffer, parts ...string) string {
	t.Helper()
	var found string
	brokertest.Eventually(t, 5*time.Second, func() bool {
		for _, l := range strings.Split(buf.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				found = l
				return true
			}
		}
		return false
	}, "a log line with "+strings.Join(parts, " "))
	return found
}

// TestConnectionLog: connects and disconnects are logged at info with the
// client id, address, protocol version, keep alive and, on disconnect, the
// reason.
func TestConnectionLog(t *testing.T) {
	log, buf := logTo()
	n := brokertest.StartLogged(t, brokertest.Config(t), nil, log)

	a := connectOK(t, n.Raw(packet.V5), login(packet.V5, "log-a", "", ""))
	line := waitLogLine(t, buf, `msg="client connected"`, "client=log-a")
	for _, want := range []string{"level=INFO", "remote=127.0.0.1:", "protocol=5", "keep_alive=60", "clean_start=true", "session_present=false"} {
		if !strings.Contains(line, want) {
			t.Errorf("connect line %q lacks %q", line, want)
		}
	}
	a.Send(&packet.Disconnect{})
	waitLogLine(t, buf, `msg="client disconnected"`, "client=log-a", `reason="the client disconnected"`)

	b := connectOK(t, n.Raw(packet.V311), login(packet.V311, "log-b", "", ""))
	waitLogLine(t, buf, `msg="client connected"`, "client=log-b", "protocol=3.1.1")
	b.Close()
	waitLogLine(t, buf, `msg="client disconnected"`, "client=log-b", `reason="the connection was closed without DISCONNECT"`)

	connectOK(t, n.Raw(packet.V5), login(packet.V5, "log-c", "", ""))
	connectOK(t, n.Raw(packet.V5), login(packet.V5, "log-c", "", ""))
	waitLogLine(t, buf, `msg="client disconnected"`, "client=log-c", `reason="another connection took over the session (session taken over (0x8E))"`)

	bad := connectOK(t, n.Raw(packet.V5), login(packet.V5, "log-d", "", ""))
	bad.SendBytes([]byte{0x30, 0x02, 0x00, 0x00}) // a PUBLISH with an empty topic
	waitLogLine(t, buf, `msg="client disconnected"`, "client=log-d", `reason="bad input`)
}

// TestFailedLoginsLoggedRateLimited: failed logins are logged at warn with
// the client id, user name and address, at most ten a minute; the first
// line after that says how many were left out.
func TestFailedLoginsLoggedRateLimited(t *testing.T) {
	clk := clocktest.New(time.Now())
	cfg := brokertest.Config(t)
	cfg.PasswordFile = writeFile(t, "passwd", passwords(t, "alice", "wonderland"))
	cfg.AllowAnonymous = "false"
	cfg.AuthFailDelay = 0
	log, buf := logTo()
	n := brokertest.StartLogged(t, cfg, clk, log)

	for range 15 {
		refused(t, n.Raw(packet.V5), login(packet.V5, "guess", "alice", "password1"))
	}
	refused(t, n.Raw(packet.V5), login(packet.V5, "anon", "", ""))
	count := func() int { return strings.Count(buf.String(), `msg="client failed to log in"`) }
	if got := count(); got != 10 {
		t.Fatalf("%d lines for 16 failed logins within a minute; want 10:\n%s", got, buf.String())
	}
	line := waitLogLine(t, buf, `msg="client failed to log in"`, "client=guess")
	for _, want := range []string{"level=WARN", "user=alice", "remote=127.0.0.1:", `code="bad user name or password (0x86)"`} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	clk.Advance(time.Minute)
	refused(t, n.Raw(packet.V5), login(packet.V5, "later", "alice", "password2"))
	waitLogLine(t, buf, `msg="client failed to log in"`, "client=later", "suppressed=6")
	if strings.Contains(buf.String(), "wonderland") || strings.Contains(buf.String(), "password1") {
		t.Fatal("a password reached the log")
	}
}

// TestSingleNodeLogIsQuiet: a node running alone elects itself leader of
// its metadata group without Raft's narration reaching an info-level log
// (it used to log "heartbeat timeout reached, starting election" at warn).
func TestSingleNodeLogIsQuiet(t *testing.T) {
	log, buf := logTo()
	n := brokertest.StartLogged(t, brokertest.Config(t), nil, log)
	brokertest.Eventually(t, 10*time.Second, func() bool { return n.Cluster(t.Context()).IsLeader }, "the node leads its metadata group")
	n.Stop()
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(l, "component=raft") || strings.Contains(l, "election") {
			t.Errorf("Raft's narration in an info-level log: %s", l)
		}
	}
}
