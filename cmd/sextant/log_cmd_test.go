package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
)

// lockedBuffer is a bytes.Buffer safe to write from a running command and
// read from the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogCommands: sextant log get, latest and tail read a sequenced
// topic published over MQTT on a node running alone; sextant groups lists
// its group; errors are one clear line.
func TestLogCommands(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	admin := n.Addr("admin")
	f := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(f, []byte("rules:\n  - match: orders/#\n    mode: sequenced\n    replicas: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "policy", "set", "--admin", admin, "-f", f); code != 0 {
		t.Fatalf("policy set: %d %q %q", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "groups", "--admin", admin)
	if code != 0 || !strings.Contains(out, "no placement groups") {
		t.Fatalf("groups with none: %d %q %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "log", "get", "orders/eu", "--admin", admin)
	if code == 0 || !strings.Contains(errOut, "no message was ever published") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("log get before any publish: %d %q", code, errOut)
	}

	pub := n.ConnectV5(&paho.Connect{ClientID: "pub", CleanStart: true, KeepAlive: 30})
	for i := 1; i <= 5; i++ {
		pub.Pub("orders/eu", 1, false, fmt.Sprintf("order %d", i))
	}
	pub.Pub("orders/eu", 1, false, "\xff\x00")

	code, out, errOut = runCLI(t, "log", "get", "orders/eu", "--admin", admin)
	if code != 0 || strings.Count(out, "\n") != 6 || !strings.Contains(lineWith(out, `"order 1"`), "qos1") ||
		!strings.HasPrefix(lineWith(out, `"order 1"`), "1 ") || !strings.HasPrefix(lineWith(out, "base64:/wA="), "6 ") {
		t.Fatalf("log get: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "log", "get", "orders/eu", "--from", "2", "--limit", "2", "--admin", admin)
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.HasPrefix(out, "2 ") || !strings.Contains(errOut, "more from index 4 to 6") {
		t.Fatalf("log get --from 2 --limit 2: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "log", "get", "orders/eu", "--from", "latest", "--format", "json", "--admin", admin)
	var rec adminapi.LogRecord
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Index != 6 || rec.PayloadBase64 != "/wA=" {
		t.Fatalf("log get --from latest --format json: %d %q", code, out)
	}
	for _, read := range []string{"home", "local"} {
		if code, out, errOut := runCLI(t, "log", "get", "orders/eu", "--read", read, "--admin", admin); code != 0 || strings.Count(out, "\n") != 6 {
			t.Fatalf("log get --read %s: %d %q %q", read, code, out, errOut)
		}
	}
	code, out, _ = runCLI(t, "log", "latest", "orders/eu", "--admin", admin)
	if code != 0 || !strings.Contains(out, "indexes 1..6 (6 held)") || !strings.Contains(out, "replicas "+n.Cfg.NodeID) {
		t.Fatalf("log latest: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "groups", "--admin", admin)
	if row := lineWith(out, "orders/eu"); code != 0 || len(strings.Fields(row)) != 11 || strings.Fields(row)[8] != "6" {
		t.Fatalf("groups: %d %q", code, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"log", "get", "fleet/x"}, "is not a sequenced topic"},
		{[]string{"log", "get", "orders/+"}, "HTTP 400"},
		{[]string{"log", "get", "orders/eu", "--from", "0"}, "want an index (1 and up), earliest or latest"},
		{[]string{"log", "get", "orders/eu", "--format", "xml"}, "--format"},
		{[]string{"log", "get", "orders/eu", "--read", "any"}, "--read"},
		{[]string{"log", "tail", "fleet/x"}, "is not a sequenced topic"},
	} {
		code, _, errOut := runCLI(t, append(c.args, "--admin", admin)...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: %d %q, want one line with %q", c.args, code, errOut, c.want)
		}
	}

	// tail from 5 prints 5 and 6, then follows new records until cancelled.
	minTailWait, maxTailWait = 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var tout, terr lockedBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"log", "tail", "orders/eu", "--from", "5", "--admin", admin}, nil, &tout, &terr)
	}()
	brokertest.Eventually(t, 10*time.Second, func() bool { return strings.Count(tout.String(), "\n") == 2 }, "tail prints the records from 5")
	pub.Pub("orders/eu", 1, false, "order 7")
	pub.Pub("orders/eu", 1, false, "order 8")
	brokertest.Eventually(t, 10*time.Second, func() bool { return strings.Count(tout.String(), "\n") == 4 }, "tail prints new records")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("tail ended with %d: %q", code, terr.String())
	}
	lines := strings.Split(strings.TrimSpace(tout.String()), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprint(5+i)+" ") {
			t.Fatalf("tail line %d: %q (all: %q)", i, l, tout.String())
		}
	}
	if !strings.Contains(lines[3], `"order 8"`) {
		t.Fatalf("tail: %q", tout.String())
	}
}

// compactingHistory holds indexes 5 to 6 of topic "t": earlier ones were
// removed by retention.
type compactingHistory struct{}

func (compactingHistory) TopicLog(context.Context, string, adminapi.Where) (adminapi.TopicLog, error) {
	return adminapi.TopicLog{Topic: "t", First: 5, Latest: 6, Count: 2}, nil
}

func (h compactingHistory) LogRecords(ctx context.Context, topic string, from uint64, limit int, w adminapi.Where) ([]adminapi.LogRecord, adminapi.TopicLog, error) {
	tl, _ := h.TopicLog(ctx, topic, w)
	if from != 0 && from < 5 {
		return nil, tl, &adminapi.CompactedError{Topic: topic, First: 5}
	}
	var out []adminapi.LogRecord
	for i := max(from, 5); i <= 6 && len(out) < limit; i++ {
		r := adminapi.LogRecord{Index: i, QoS: 1}
		r.SetPayload([]byte(fmt.Sprint("m", i)))
		out = append(out, r)
	}
	return out, tl, nil
}

// TestLogTailReportsRetentionLoss: tail from an index retention removed
// says which records it lost, then goes on from the first held; get says
// where the log starts.
func TestLogTailReportsRetentionLoss(t *testing.T) {
	api := adminapi.New(statusOnly{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)).WithHistory(compactingHistory{})
	srv := httptest.NewServer(api)
	defer srv.Close()
	minTailWait, maxTailWait = 10*time.Millisecond, 50*time.Millisecond

	code, _, errOut := runCLI(t, "log", "get", "t", "--from", "2", "--admin", srv.URL)
	if code == 0 || !strings.Contains(errOut, "the first index held is 5") || !strings.Contains(errOut, "--from earliest") {
		t.Fatalf("get below retention: %d %q", code, errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var tout, terr lockedBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"log", "tail", "t", "--from", "2", "--admin", srv.URL}, nil, &tout, &terr)
	}()
	brokertest.Eventually(t, 10*time.Second, func() bool { return strings.Count(tout.String(), "\n") == 2 }, "tail prints 5 and 6")
	cancel()
	<-done
	if !strings.Contains(terr.String(), "records from 2 to 4 were removed by retention") || !strings.HasPrefix(tout.String(), "5 ") {
		t.Fatalf("tail: stdout %q stderr %q", tout.String(), terr.String())
	}
}

type statusOnly struct{}

func (statusOnly) Status() adminapi.Status { return adminapi.Status{} }
func (statusOnly) Ready() error            { return nil }
