package brokertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Mosquitto runs Debian's mosquitto_pub and mosquitto_sub against brokers,
// for the process and container tests.
type Mosquitto struct {
	Pub, Sub string   // paths of mosquitto_pub and mosquitto_sub
	Args     []string // extra arguments for both ("-V", "5")
}

// RequireMosquitto finds the tools (skipping the test, or failing it under
// CI=true, when they are missing).
func RequireMosquitto(t testing.TB, args ...string) Mosquitto {
	t.Helper()
	return Mosquitto{
		Pub:  RequireTool(t, "mosquitto_pub", "mosquitto-clients"),
		Sub:  RequireTool(t, "mosquitto_sub", "mosquitto-clients"),
		Args: args,
	}
}

// Route subscribes on subAddr (HOST:PORT) to topic/# at QoS 1 and
// publishes on pubAddr: first probes until one reaches the subscriber (a
// subscription's interest reaches other nodes a round trip after its
// SUBACK), then n numbered messages, which must all arrive, in order.
func (m Mosquitto) Route(t testing.TB, subAddr, pubAddr, topic string, n int) {
	t.Helper()
	subHost, subPort, _ := strings.Cut(subAddr, ":")
	pubHost, pubPort, _ := strings.Cut(pubAddr, ":")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append([]string{"-h", subHost, "-p", subPort, "-t", topic + "/#", "-q", "1", "-v"}, m.Args...)
	sub := exec.CommandContext(ctx, m.Sub, args...)
	out, err := sub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = sub.Wait() }()
	lines := lineReader(out)
	pub := func(payload string) {
		t.Helper()
		args := append([]string{"-h", pubHost, "-p", pubPort, "-t", topic + "/x", "-q", "1", "-m", payload}, m.Args...)
		if out, err := exec.Command(m.Pub, args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub to %s: %v: %s", pubAddr, err, out)
		}
	}
	got := false
	for i := 0; i < 100 && !got; i++ {
		pub("probe")
		select {
		case l := <-lines:
			got = strings.HasSuffix(l, " probe")
		case <-time.After(300 * time.Millisecond):
		}
	}
	if !got {
		t.Fatalf("no message from %s reached a subscriber on %s", pubAddr, subAddr)
	}
	for i := range n {
		pub(strconv.Itoa(i))
	}
	for want := 0; want < n; {
		select {
		case l := <-lines:
			if strings.HasSuffix(l, " probe") {
				continue
			}
			if l != fmt.Sprintf("%s/x %d", topic, want) {
				t.Fatalf("from %s to %s: got %q, want message %d (in order)", pubAddr, subAddr, l, want)
			}
			want++
		case <-time.After(10 * time.Second):
			t.Fatalf("from %s to %s: only %d of %d messages arrived", pubAddr, subAddr, want, n)
		}
	}
}

// lineReader streams a process's output lines.
func lineReader(r io.Reader) <-chan string {
	ch := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}
