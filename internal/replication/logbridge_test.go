package replication

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRaftLogsReachSlog: Raft's records arrive in slog with their
// key-value pairs; INFO and below at debug level, WARN and ERROR at warn.
func TestRaftLogsReachSlog(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := hclogFor(l.With("group", "pg/1"), "raft")
	h.Info("entering follower state", "term", 3)
	h.Named("net").Error("failed to heartbeat", "peer", "n2")
	h.Trace("chatter")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`level=DEBUG msg="entering follower state" group=pg/1 term=3 component=raft`,
		`level=WARN msg="failed to heartbeat" group=pg/1 peer=n2 component=raft.net`,
		`level=DEBUG msg=chatter group=pg/1 component=raft`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s\nwant %s", i, lines[i], want)
		}
	}

	buf.Reset()
	quiet := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	hclogFor(quiet, "raft").Info("routine")
	if buf.Len() != 0 {
		t.Errorf("routine chatter reached an info-level logger: %s", buf.String())
	}
}
