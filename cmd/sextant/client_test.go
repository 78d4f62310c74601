package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqttclient/mqttclienttest"
)

type broker struct {
	name string
	host string
	port string
	pid  int
}

// brokers starts Sextant in-process and Mosquitto (when installed; CI=true
// requires it).
func brokers(t *testing.T) []broker {
	t.Helper()
	n := brokertest.Start(t, brokertest.Config(t))
	h, p, _ := net.SplitHostPort(n.MQTT())
	out := []broker{{"sextant", h, p, os.Getpid()}}
	if _, ok := mqttclienttest.MosquittoBinary(t); ok {
		m := mqttclienttest.StartMosquitto(t)
		h, p, _ := net.SplitHostPort(m.Addr())
		out = append(out, broker{"mosquitto", h, p, m.PID()})
	}
	return out
}

func (b broker) args(a ...string) []string { return append(a, "-h", b.host, "-p", b.port) }

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return p
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("sextant %s: exit %d, stderr %q, stdout %q", strings.Join(args, " "), code, errOut, out)
	}
	return out
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func TestPubSubThroughPersistentSession(t *testing.T) {
	for _, b := range brokers(t) {
		for _, v := range []string{"5", "311"} {
			t.Run(b.name+"/v"+v, func(t *testing.T) {
				topic, id := "cli/"+b.name+"/"+v, "cli-sub-"+b.name+v
				// Set up a persistent session with the subscription, then
				// publish while it is offline: no timing involved.
				mustRun(t, b.args("sub", "-V", v, "-t", topic, "-q", "1", "-c", "-x", "300", "-i", id, "-E")...)
				mustRun(t, b.args("pub", "-V", v, "-t", topic, "-q", "1", "-m", "hello", "--count", "3",
					"-D", "k=v", "--content-type", "text/plain")...)
				out := mustRun(t, b.args("sub", "-V", v, "-t", topic, "-q", "1", "-c", "-x", "300", "-i", id,
					"-C", "3", "-W", "10", "--json")...)
				ls := lines(out)
				if len(ls) != 3 {
					t.Fatalf("want 3 JSON lines, got %q", out)
				}
				for _, l := range ls {
					var m map[string]any
					if err := json.Unmarshal([]byte(l), &m); err != nil {
						t.Fatalf("%q: %v", l, err)
					}
					if m["topic"] != topic || m["payload"] != "hello" || m["qos"] != 1.0 || m["retain"] != false {
						t.Fatalf("message %v", m)
					}
					props, _ := m["properties"].(map[string]any)
					if v == "5" && (props == nil || props["content_type"] != "text/plain" || props["user_properties"] == nil) {
						t.Errorf("MQTT 5 properties missing: %v", m)
					}
				}
			})
		}
	}
}

func TestSubPlainVerboseAndLatency(t *testing.T) {
	b := brokers(t)[0]
	id := "lat-sub"
	mustRun(t, b.args("sub", "-t", "lat/x", "-q", "2", "-c", "-x", "300", "-i", id, "-E")...)
	mustRun(t, b.args("pub", "-t", "lat/x", "-q", "2", "--stamp", "-m", "m", "--count", "2")...)
	mustRun(t, b.args("pub", "-t", "lat/x", "-q", "2", "-m", "unstamped")...)
	out := mustRun(t, b.args("sub", "-t", "lat/x", "-q", "2", "-c", "-x", "300", "-i", id, "-C", "3", "-v", "--latency")...)
	ls := lines(out)
	if len(ls) != 4 {
		t.Fatalf("want 3 messages and a summary, got %q", out)
	}
	for _, l := range ls[:2] {
		if !strings.HasSuffix(l, " ms lat/x m") {
			t.Errorf("stamped line %q", l)
		}
	}
	if ls[2] != "lat/x unstamped" {
		t.Errorf("unstamped line %q", ls[2])
	}
	if !strings.Contains(ls[3], "3 messages, 2 stamped") || !strings.Contains(ls[3], "p99.9") {
		t.Errorf("summary %q", ls[3])
	}
}

func TestPubFromStdinLines(t *testing.T) {
	b := brokers(t)[0]
	id := "stdin-sub"
	mustRun(t, b.args("sub", "-t", "in/l", "-q", "1", "-c", "-x", "300", "-i", id, "-E")...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old }()
	fmt.Fprint(w, "one\ntwo\n")
	w.Close()
	out := mustRun(t, b.args("pub", "-t", "in/l", "-q", "1", "-l")...)
	if !strings.Contains(out, "published 2 messages") {
		t.Errorf("summary %q", out)
	}
	out = mustRun(t, b.args("sub", "-t", "in/l", "-q", "1", "-c", "-x", "300", "-i", id, "-C", "2")...)
	if out != "one\ntwo\n" {
		t.Fatalf("got %q", out)
	}
}

func TestPingModes(t *testing.T) {
	for _, b := range brokers(t) {
		for _, mode := range []string{"ping", "qos0", "qos1", "qos2"} {
			t.Run(b.name+"/"+mode, func(t *testing.T) {
				out := mustRun(t, b.args("ping", "--mode", mode, "-c", "3", "--interval", "0s")...)
				if !strings.Contains(out, "3 sent, 3 answered") || !strings.Contains(out, "p99.9") {
					t.Fatalf("output %q", out)
				}
			})
		}
	}
}

func TestPingJSONOverWebSocket(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	out := mustRun(t, "ping", "--url", "ws://"+n.Addr("ws")+"/mqtt", "-c", "2", "--interval", "0s", "--json")
	var s pingSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Sent != 2 || s.Answered != 2 || s.Latency.Count != 2 {
		t.Fatalf("%q: %+v %v", out, s, err)
	}
}

func TestPingFailsWhenTheBrokerDoesNotAnswer(t *testing.T) {
	fb := mqttclienttest.Start(t, mqttclienttest.Faults{IgnorePing: true})
	code, out, errOut := runCLI(t, "ping", "--url", fb.Addr(), "-c", "2", "--interval", "0s", "--timeout", "100ms")
	if code != 1 || !strings.Contains(errOut, "did not answer") || len(lines(errOut)) != 1 {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	if !strings.Contains(out, "2 sent, 0 answered") {
		t.Errorf("summary %q", out)
	}
}

func TestUnreachableBrokerIsOneLineAndNonZero(t *testing.T) {
	port := closedPort(t)
	for _, args := range [][]string{
		{"pub", "-t", "x", "-m", "y"},
		{"sub", "-t", "x"},
		{"ping"},
		{"bench", "p2p", "--count", "10"},
		{"bench", "connections", "--conns", "10"},
	} {
		code, _, errOut := runCLI(t, append(args, "-h", "127.0.0.1", "-p", port, "--connect-timeout", "2s")...)
		if code == 0 || len(lines(errOut)) != 1 || !strings.Contains(errOut, "cannot reach") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestInvalidFlagsAreOneLineAndExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"pub", "--no-such-flag"},
		{"pub", "-t", "x"},
		{"pub", "-t", "x", "-m", "y", "-q", "3"},
		{"pub", "-t", "x", "-m", "y", "-V", "4.0"},
		{"pub", "-t", "x", "-m", "y", "-f", "z"},
		{"sub"},
		{"sub", "-t", "x", "--retain-handling", "5"},
		{"sub", "-t", "x", "-D", "novalue"},
		{"ping", "--mode", "qos3"},
		{"ping", "-c", "0"},
		{"bench"},
		{"bench", "sideways"},
		{"bench", "p2p", "--size", "4"},
		{"bench", "p2p", "--url", "http://x"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || len(lines(errOut)) != 1 || !strings.HasPrefix(errOut, "sextant: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestHelpReadsWell(t *testing.T) {
	for cmd, want := range map[string][]string{
		"pub":   {"Usage: sextant pub", "-h, --host", "-p, --port", "--url", "-t, --topic", "-m, --message", "-q, --qos", "--stamp", "--will-topic", "Examples"},
		"sub":   {"Usage: sextant sub", "-h, --host", "-t, --topic", "--json", "--latency", "-C, --count", "sx-index", "Examples"},
		"ping":  {"Usage: sextant ping", "--mode", "--interval"},
		"bench": {"Usage: sextant bench", "fanout", "--subs", "--broker-pid", "--json"},
	} {
		code, out, errOut := runCLI(t, cmd, "--help")
		if code != 0 || errOut != "" {
			t.Errorf("%s --help: exit %d, stderr %q", cmd, code, errOut)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q", cmd, w)
			}
		}
	}
}

func TestBenchCommand(t *testing.T) {
	for _, b := range brokers(t) {
		t.Run(b.name, func(t *testing.T) {
			out := mustRun(t, b.args("bench", "p2p", "-q", "1", "--count", "500", "--json", "--quiet",
				"--broker-pid", strconv.Itoa(b.pid))...)
			var res struct {
				Sent, Received, Lost, Duplicated, Reordered int64
				Broker                                      *struct{ PID int }
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			if res.Sent != 500 || res.Received != 500 || res.Lost+res.Duplicated+res.Reordered != 0 || res.Broker == nil || res.Broker.PID != b.pid {
				t.Fatalf("result %+v", res)
			}
			out = mustRun(t, b.args("bench", "fanout", "--subs", "20", "--count", "50", "-q", "1", "--strict")...)
			if !strings.Contains(out, "1000 of 1000 expected") || !strings.Contains(out, "p99.9") {
				t.Fatalf("text report %q", out)
			}
		})
	}
}

func TestBenchStrictFailsOnLoss(t *testing.T) {
	fb := mqttclienttest.Start(t, mqttclienttest.Faults{DropEvery: 50})
	code, out, errOut := runCLI(t, "bench", "p2p", "--url", fb.Addr(), "--count", "200", "--drain", "200ms", "--strict")
	if code != 3 || !strings.Contains(out, "lost 4") || len(lines(errOut)) != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSubCountsOnlyWhatItPrints(t *testing.T) {
	// -R drops retained messages; -C counts printed ones.
	b := brokers(t)[0]
	mustRun(t, b.args("pub", "-t", "ret/x", "-r", "-q", "1", "-m", "old")...)
	id := "ret-sub"
	mustRun(t, b.args("sub", "-t", "ret/x", "-q", "1", "-c", "-x", "300", "-i", id, "-E", "-R")...)
	mustRun(t, b.args("pub", "-t", "ret/x", "-q", "1", "-m", "new")...)
	out := mustRun(t, b.args("sub", "-t", "ret/x", "-q", "1", "-c", "-x", "300", "-i", id, "-C", "1", "-R",
		"--retain-handling", "2")...)
	if out != "new\n" {
		t.Fatalf("got %q", out)
	}
}

// TestSubReconnectsAfterTheBrokerRestarts: sub survives a broker restart.
// With a persistent session it resumes it (a message published while it was
// away arrives); with a clean session it subscribes again.
func TestSubReconnectsAfterTheBrokerRestarts(t *testing.T) {
	for _, persistent := range []bool{true, false} {
		t.Run(fmt.Sprintf("persistent=%v", persistent), func(t *testing.T) {
			n := brokertest.Start(t, brokertest.Config(t))
			h, p, _ := net.SplitHostPort(n.MQTT())
			args := []string{"sub", "-h", h, "-p", p, "-t", "rc/x", "-q", "1", "-i", "rc-sub", "-C", "2", "-W", "60"}
			if persistent {
				args = append(args, "-c", "-x", "300")
			}
			var out, errOut brokertest.LockedBuffer
			done := make(chan int, 1)
			go func() { done <- run(context.Background(), args, nil, &out, &errOut) }()
			subscribed := func(n *brokertest.Node) func() bool {
				return func() bool {
					return n.Broker().Stats().Online == 1 && brokertest.Value(n.Metrics().Subscriptions) == 1
				}
			}
			brokertest.Eventually(t, 10*time.Second, subscribed(n), "sub subscribed")
			mustRun(t, "pub", "-h", h, "-p", p, "-t", "rc/x", "-q", "1", "-m", "one")
			brokertest.Eventually(t, 10*time.Second, func() bool { return out.String() == "one\n" }, "first message printed")
			// Restart once the broker has the PUBACK: an unacknowledged QoS 1
			// message would rightly be sent again.
			brokertest.Eventually(t, 10*time.Second, func() bool {
				return brokertest.Value(n.Metrics().InflightMessages) == 0
			}, "first message acknowledged")

			n = n.Restart()
			if persistent {
				// Published while sub is away: the session keeps it.
				mustRun(t, "pub", "-h", h, "-p", p, "-t", "rc/x", "-q", "1", "-m", "two")
			} else {
				brokertest.Eventually(t, 30*time.Second, subscribed(n), "sub subscribed again")
				mustRun(t, "pub", "-h", h, "-p", p, "-t", "rc/x", "-q", "1", "-m", "two")
			}
			if code := <-done; code != 0 {
				t.Fatalf("sub exited %d; stderr %q", code, errOut.String())
			}
			if got := out.String(); got != "one\ntwo\n" {
				t.Fatalf("sub printed %q", got)
			}
			if e := errOut.String(); !strings.Contains(e, "reconnecting") || !strings.Contains(e, fmt.Sprintf("session present: %v", persistent)) {
				t.Errorf("stderr %q does not report the reconnection", e)
			}
		})
	}
}

// TestSubExitsWhenRefusedForGood: a lost connection that retrying cannot
// fix (the session taken over by another client with the same id) ends sub
// with one line and a non-zero status; so does any loss with --no-reconnect.
func TestSubExitsWhenRefusedForGood(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	h, p, _ := net.SplitHostPort(n.MQTT())
	for _, tc := range []struct {
		extra []string
		why   string
	}{{nil, "session taken over"}, {[]string{"--no-reconnect"}, "server shutting down"}} {
		extra := tc.extra
		brokertest.Eventually(t, 10*time.Second, func() bool { return n.Broker().Stats().Online == 0 }, "no client connected")
		var out, errOut brokertest.LockedBuffer
		done := make(chan int, 1)
		args := append([]string{"sub", "-h", h, "-p", p, "-t", "rf/x", "-i", "rf-sub", "-W", "60"}, extra...)
		go func() { done <- run(context.Background(), args, nil, &out, &errOut) }()
		brokertest.Eventually(t, 10*time.Second, func() bool { return n.Broker().Stats().Online == 1 }, "sub connected")
		if extra == nil {
			mustRun(t, "sub", "-h", h, "-p", p, "-t", "rf/y", "-i", "rf-sub", "-E") // takes the session over
		} else {
			n = n.Restart()
		}
		code := <-done
		if e := errOut.String(); code != 1 || len(lines(e)) != 1 || !strings.Contains(e, tc.why) {
			t.Errorf("%v: exit %d, stderr %q", extra, code, errOut.String())
		}
	}
}
