package logging

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/clock/clocktest"
)

func captured(level slog.Level) (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime})), &buf
}

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestRepeatsLetsABurstThroughPerWindow: within a window the first burst
// records of a kind pass, the rest are counted, and the first one after
// the window carries the count; other kinds are independent.
func TestRepeatsLetsABurstThroughPerWindow(t *testing.T) {
	clk := clocktest.New(time.Unix(1000, 0))
	r := NewRepeats(clk, time.Minute, 2)
	var got []string
	try := func(key string) {
		ok, n := r.Allow(key)
		got = append(got, fmt.Sprintf("%s:%v:%d", key, ok, n))
	}
	try("a")
	try("a")
	try("a")
	try("b")
	try("a")
	clk.Advance(59 * time.Second)
	try("a")
	clk.Advance(time.Second)
	try("a")
	try("a")
	want := "a:true:0 a:true:0 a:false:0 b:true:0 a:false:0 a:false:0 a:true:3 a:true:0"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
}

func TestRepeatsForgetsOldKindsWhenFull(t *testing.T) {
	clk := clocktest.New(time.Unix(1000, 0))
	r := NewRepeats(clk, time.Minute, 1)
	for i := range maxRepeatKeys {
		r.Allow(fmt.Sprint(i))
	}
	clk.Advance(time.Minute)
	r.Allow("new")
	r.mu.Lock()
	n := len(r.mu.seen)
	r.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d kinds remembered after the window; want only the new one", n)
	}
}

// TestRaftLogsReachSlog: Raft's records arrive with their key-value pairs
// and the logger's name; its narration at debug, failures to reach a peer
// at warn, other errors at error.
func TestRaftLogsReachSlog(t *testing.T) {
	l, buf := captured(slog.LevelDebug)
	h := Hclog(l.With("group", "pg/1"), "raft", nil)
	h.Info("entering follower state", "term", 3)
	h.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "")
	h.Named("net").Error("failed to heartbeat to", "peer", "n2")
	h.Error("failed to commit logs", "error", "disk full")
	h.Trace("chatter")
	want := []string{
		`level=DEBUG msg="entering follower state" group=pg/1 term=3 component=raft`,
		`level=DEBUG msg="heartbeat timeout reached, starting election" group=pg/1 last-leader-addr="" component=raft`,
		`level=WARN msg="failed to heartbeat to" group=pg/1 peer=n2 component=raft.net`,
		`level=ERROR msg="failed to commit logs" group=pg/1 error="disk full" component=raft`,
		`level=DEBUG msg=chatter group=pg/1 component=raft`,
	}
	got := lines(buf)
	if len(got) != len(want) {
		t.Fatalf("%d lines:\n%s", len(got), buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %s\nwant    %s", i, got[i], want[i])
		}
	}
}

// TestRaftRoutineStaysOutOfAnInfoLog: what a single node logs when it
// elects itself, and what any node logs while shutting down, does not
// reach a log at info level.
func TestRaftRoutineStaysOutOfAnInfoLog(t *testing.T) {
	l, buf := captured(slog.LevelInfo)
	h := Hclog(l, "raft", nil)
	h.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
	h.Info("entering candidate state", "node", "n1", "term", 2)
	h.Info("election won", "term", 2, "tally", 1)
	h.Warn("no known peers, aborting election")
	h.Warn("appendEntries rejected, sending older logs", "peer", "n2", "next", 1)
	h.Named("net").Error("failed to decode incoming command", "error", "use of closed network connection")
	if buf.Len() != 0 {
		t.Fatalf("routine chatter reached an info-level log:\n%s", buf.String())
	}
}

// TestRaftFloodIsRateLimited: a leader heartbeating a dead peer (Raft
// retries every few hundred milliseconds, forever) writes one line per
// window, and the next one says how many it stood for.
func TestRaftFloodIsRateLimited(t *testing.T) {
	l, buf := captured(slog.LevelInfo)
	clk := clocktest.New(time.Unix(1000, 0))
	h := Hclog(l, "raft", NewRepeats(clk, time.Minute, 1))
	for range 3 * 60 { // three a second for a minute
		h.Error("failed to heartbeat to", "peer", "127.0.0.1:7946", "error", "connection refused")
		clk.Advance(time.Second / 3)
	}
	clk.Advance(time.Second)
	h.Error("failed to heartbeat to", "peer", "127.0.0.1:7946", "error", "connection refused")
	got := lines(buf)
	if len(got) != 2 {
		t.Fatalf("%d lines for 181 heartbeat failures; want 2:\n%s", len(got), buf.String())
	}
	if !strings.Contains(got[1], "suppressed=179") || !strings.HasPrefix(got[1], "level=WARN") {
		t.Fatalf("second line %q; want level WARN and suppressed=179", got[1])
	}
}

// TestGossipLogsReachSlog: Serf's and memberlist's "[LEVEL] ..." lines
// become slog records; their narration (member events, which membership
// logs itself) at debug, a peer that does not answer at warn, rate-limited
// across addresses.
func TestGossipLogsReachSlog(t *testing.T) {
	l, buf := captured(slog.LevelInfo)
	clk := clocktest.New(time.Unix(1000, 0))
	std := StdLog(l, NewRepeats(clk, time.Minute, 1))
	std.Printf("[INFO] serf: EventMemberJoin: n2 127.0.0.2")
	std.Printf("[WARN] memberlist: Refuting a dead message (from: n1)")
	std.Printf("[ERR] memberlist: Failed to send gossip to 127.0.0.1:7946: dial tcp 127.0.0.1:7946: connect: connection refused")
	std.Printf("[ERR] memberlist: Failed to send gossip to 127.0.0.3:7946: dial tcp 127.0.0.3:7946: connect: connection refused")
	std.Printf("[WARN] memberlist: Was able to connect to n2 over TCP but UDP probes failed, network may be misconfigured")
	std.Printf("[ERR] serf: Node name conflicts with another node at 127.0.0.2:7946. Names must be unique! (Resolution enabled: true)")
	want := []string{
		`level=WARN msg="memberlist: Failed to send gossip to 127.0.0.1:7946: dial tcp 127.0.0.1:7946: connect: connection refused"`,
		`level=WARN msg="memberlist: Was able to connect to n2 over TCP but UDP probes failed, network may be misconfigured"`,
		`level=ERROR msg="serf: Node name conflicts with another node at 127.0.0.2:7946. Names must be unique! (Resolution enabled: true)"`,
	}
	got := lines(buf)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
