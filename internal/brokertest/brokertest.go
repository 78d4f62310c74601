// Package brokertest runs Sextant nodes for tests: in-process nodes on
// ephemeral loopback ports with a temporary data directory (optionally on a
// manual clock), the real sextant binary as a child process (BuildSextant,
// StartProcess), helpers to connect real MQTT clients (paho v5 and v3.1.1)
// to them, and Raw, a packet-level client built on internal/mqtt/packet that
// shows exactly what the broker sends. It is imported only by tests.
//
// Helpers fail the test from the test's goroutine only; each wait is bounded
// (a few seconds) so a broken broker fails a test instead of hanging it.
package brokertest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/node"
)

// Node is a running in-process node.
type Node struct {
	*node.Node
	T     testing.TB
	Cfg   config.Config
	Clock clock.Clock // nil: the wall clock
}

// Config returns a config for a test node: ephemeral loopback ports, a fresh
// data directory, $SYS off, fsync never (tests do not test the disk), and
// no per-address or publish limits (tests open many connections from one
// address and publish as fast as they can; the limits' own tests set them).
func Config(t testing.TB) config.Config {
	c := config.Default()
	c.DataDir = t.TempDir()
	c.MQTTAddr = "127.0.0.1:0"
	c.WSAddr = "127.0.0.1:0"
	c.AdminAddr = "127.0.0.1:0"
	c.Fsync = "never"
	c.SysInterval = 0
	c.NodeID = "test"
	c.MaxConnsPerIP, c.ConnectRatePerIP, c.PublishRate, c.PublishBytes = 0, 0, 0, 0
	return c
}

// Start starts a node with cfg and stops it when the test ends.
func Start(t testing.TB, cfg config.Config) *Node {
	t.Helper()
	return StartClock(t, cfg, nil)
}

// StartClock starts a node whose broker runs on clk (nil: the wall clock),
// for example a clocktest.Manual that drives expiry and will delays.
// Socket deadlines are computed from clk too, so a manual clock should start
// near the wall clock's time.
func StartClock(t testing.TB, cfg config.Config, clk clock.Clock) *Node {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("SEXTANT_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return StartLogged(t, cfg, clk, log)
}

// StartLogged starts a node as StartClock does, logging to log (tests of
// what the node logs give it a handler they read).
func StartLogged(t testing.TB, cfg config.Config, clk clock.Clock, log *slog.Logger) *Node {
	t.Helper()
	n, err := node.New(cfg, node.Options{Log: log, Version: "test", Clock: clk})
	if err != nil {
		t.Fatalf("brokertest: new node: %v", err)
	}
	if err := n.Start(); err != nil {
		t.Fatalf("brokertest: start node: %v", err)
	}
	tn := &Node{Node: n, T: t, Cfg: cfg, Clock: clk}
	t.Cleanup(func() { tn.Stop() })
	return tn
}

// Stop shuts the node down (idempotent).
func (n *Node) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		n.T.Errorf("brokertest: shutdown: %v", err)
	}
}

// Restart stops the node and starts a new one on the same data directory,
// the same ports and the same clock.
func (n *Node) Restart() *Node {
	n.T.Helper()
	cfg := n.Cfg
	cfg.MQTTAddr, cfg.WSAddr, cfg.AdminAddr = n.Addr("mqtt"), n.Addr("ws"), n.Addr("admin")
	n.Stop()
	return StartClock(n.T, cfg, n.Clock)
}

// MQTT is the node's MQTT TCP address.
func (n *Node) MQTT() string { return n.Addr("mqtt") }

// Dial opens a TCP connection to the node's MQTT listener.
func (n *Node) Dial() net.Conn {
	n.T.Helper()
	c, err := net.DialTimeout("tcp", n.MQTT(), 5*time.Second)
	if err != nil {
		n.T.Fatalf("brokertest: dial: %v", err)
	}
	n.T.Cleanup(func() { c.Close() })
	return c
}

// Eventually waits until cond holds, polling, for at most d. It is for
// conditions on another process or on state without a notification.
func Eventually(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s", d, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
