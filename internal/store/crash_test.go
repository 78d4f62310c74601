package store

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/message"
)

var crashSeed = flag.Uint64("crash.seed", 0, "seed of TestKill9KeepsAcknowledgedBatches (0: derive one from the clock)")

// The crash child's workload: batch i puts message i of client "c", deletes
// message i-crashWindow, replaces retained topic t/<i mod 16> and rewrites
// the session with ExpiryInterval i. Each payload is a function of i, and
// some exceed a page, so that overflow pages are written too.
const (
	crashEnv    = "SEXTANT_STORE_CRASH_CHILD" // path of the store file, in the child
	crashWindow = 100
	crashTopics = 16
)

func crashPayload(i uint64) []byte {
	n := int(i*7919) % 600
	if i%97 == 0 {
		n = 9000
	}
	return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, n/2+1)[:n]
}

func crashBatch(b *Batch, i uint64) {
	b.PutMessage("c", &QueuedMessage{Seq: i, QoS: 1, Msg: &message.Message{Topic: "q", Payload: crashPayload(i)}})
	if i > crashWindow {
		b.DeleteMessage("c", i-crashWindow)
	}
	b.PutRetained(&message.Message{Topic: fmt.Sprint("t/", i%crashTopics), Payload: crashPayload(i), Retain: true})
	b.PutSession(&SessionRecord{ClientID: "c", Version: 5, ExpiryInterval: uint32(i)})
}

// TestCrashChild is the process the crash test kills. It runs only when the
// parent sets crashEnv: it commits batches from NextSeq on, without waiting,
// and prints "ack <i>" from each done callback.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("run by TestKill9KeepsAcknowledgedBatches")
	}
	s, err := Open(path, Options{Fsync: FsyncAlways, QueueLen: 256})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	next, err := s.NextSeq("c")
	if err != nil {
		fmt.Println("next seq:", err)
		os.Exit(2)
	}
	for i := next; ; i++ {
		b := new(Batch)
		crashBatch(b, i)
		err := s.Commit(context.Background(), b, func(err error) {
			if err != nil {
				fmt.Println("commit:", err)
				os.Exit(2)
			}
			// One write(2) per ack, straight to the pipe.
			_, _ = os.Stdout.WriteString("ack " + strconv.FormatUint(i, 10) + "\n")
		})
		if err != nil {
			fmt.Println("commit:", err)
			os.Exit(2)
		}
	}
}

func TestKill9KeepsAcknowledgedBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) // reproduce with -crash.seed
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "state.db")

	maxAcked := uint64(0)
	for round := 0; round < 4; round++ {
		killAfter := 1 + rng.IntN(600) // acks seen in this round before the kill
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		seen, killed := 0, false
		var other []string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			n, ok := strings.CutPrefix(sc.Text(), "ack ")
			if !ok {
				other = append(other, sc.Text())
				continue
			}
			i, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", sc.Text())
			}
			if i <= maxAcked {
				t.Fatalf("round %d: ack %d after ack %d: done out of order or a batch re-run", round, i, maxAcked)
			}
			maxAcked = i
			if seen++; seen == killAfter && !killed {
				killed = true
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child exited after %d acks: %s", round, seen, strings.Join(other, "\n"))
		}
		t.Logf("round %d: killed after %d acks; highest acknowledged batch %d", round, seen, maxAcked)
		verifyCrashState(t, path, maxAcked)
	}
}

// verifyCrashState checks that the file opens cleanly and holds exactly the
// state after batches 1..n for some n >= maxAcked: every acknowledged batch
// is there, and transactions were atomic and applied in order.
func verifyCrashState(t *testing.T, path string, maxAcked uint64) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := s.LoadSessions(func(r *SessionRecord) error { n = uint64(r.ExpiryInterval); return nil }); err != nil {
		t.Fatal(err)
	}
	if n < maxAcked {
		t.Fatalf("last committed batch %d, but %d was acknowledged", n, maxAcked)
	}
	want := uint64(1)
	if n > crashWindow {
		want = n - crashWindow + 1
	}
	err = s.LoadMessages("c", func(q *QueuedMessage) error {
		if q.Seq != want || !bytes.Equal(q.Msg.Payload, crashPayload(q.Seq)) {
			return fmt.Errorf("message %d (want %d) with %d payload bytes", q.Seq, want, len(q.Msg.Payload))
		}
		want++
		return nil
	})
	if err != nil || want != n+1 {
		t.Fatalf("messages after batch %d: next expected %d, %v", n, want, err)
	}
	topics := 0
	err = s.LoadRetained(func(m *message.Message) error {
		topics++
		k, _ := strconv.ParseUint(strings.TrimPrefix(m.Topic, "t/"), 10, 64)
		last := n - (n+crashTopics-k)%crashTopics // the last batch i <= n with i mod 16 == k
		if !bytes.Equal(m.Payload, crashPayload(last)) {
			return fmt.Errorf("retained %s is not from batch %d", m.Topic, last)
		}
		return nil
	})
	if err != nil || topics != min(int(n), crashTopics) {
		t.Fatalf("retained after batch %d: %d topics, %v", n, topics, err)
	}
	if next, err := s.NextSeq("c"); err != nil || next != n+1 {
		t.Fatalf("NextSeq %d %v, want %d", next, err, n+1)
	}
}
