package main

import (
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestClientsAndTopicsCommands: the listing commands read a node's
// clients, sessions, subscriptions, retained messages and topics, and
// clients kick disconnects a client.
func TestClientsAndTopicsCommands(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	admin := n.Addr("admin")

	code, out, errOut := runCLI(t, "clients", "--admin", admin)
	if code != 0 || strings.TrimSpace(out) != "no clients connected" {
		t.Fatalf("clients with none: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "clients", "--admin", admin, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("clients --json with none: %d %q", code, out)
	}

	c := n.ConnectV5(&paho.Connect{ClientID: "drone-1", CleanStart: true, KeepAlive: 30})
	c.Sub("swarm/+/pos", 1)
	c.Pub("swarm/1/pos", 1, true, "52.1,4.3")

	code, out, _ = runCLI(t, "clients", "--admin", admin)
	if code != 0 || !strings.Contains(out, "drone-1") || !strings.Contains(out, "127.0.0.1:") {
		t.Fatalf("clients: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "clients", "list", "--sessions", "--admin", admin)
	if code != 0 || !strings.Contains(out, "QUEUED") || !strings.Contains(out, "drone-1") {
		t.Fatalf("clients --sessions: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "clients", "show", "drone-1", "--admin", admin)
	if code != 0 || !strings.Contains(out, "swarm/+/pos") || !strings.Contains(out, "connected from") {
		t.Fatalf("clients show: %d %q", code, out)
	}
	code, _, errOut = runCLI(t, "clients", "show", "nobody", "--admin", admin)
	if code == 0 || !strings.Contains(errOut, "no session for client") {
		t.Fatalf("clients show of an unknown client: %d %q", code, errOut)
	}

	code, out, _ = runCLI(t, "topics", "--admin", admin)
	if code != 0 || !strings.Contains(out, "swarm/1/pos") || !strings.Contains(out, "direct") {
		t.Fatalf("topics: %d %q", code, out)
	}
	if line := lineWith(out, "swarm/1/pos"); !strings.Contains(line, "true") || !strings.Contains(line, " 1 ") {
		t.Fatalf("topics row %q; want retained and one local subscription", line)
	}
	code, out, _ = runCLI(t, "topics", "retained", "swarm/#", "--admin", admin)
	if code != 0 || !strings.Contains(out, `"52.1,4.3"`) {
		t.Fatalf("topics retained: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "topics", "subscriptions", "--client", "drone-1", "--admin", admin)
	if code != 0 || !strings.Contains(out, "swarm/+/pos") {
		t.Fatalf("topics subscriptions: %d %q", code, out)
	}
	code, _, errOut = runCLI(t, "topics", "--filter", "a/#/b", "--admin", admin)
	if code == 0 || !strings.Contains(errOut, "HTTP 400") {
		t.Fatalf("a bad filter: %d %q", code, errOut)
	}

	// sextant nodes remove (and its older name, node remove) reach DELETE
	// /v1/nodes/{id}: a node running alone refuses.
	for _, args := range [][]string{{"nodes", "remove", "ghost"}, {"node", "remove", "ghost"}} {
		code, _, errOut = runCLI(t, append(args, "--admin", admin)...)
		if code == 0 || !strings.Contains(errOut, "HTTP 409") || !strings.Contains(errOut, "runs alone") {
			t.Fatalf("%v: %d %q", args, code, errOut)
		}
	}

	code, out, _ = runCLI(t, "clients", "kick", "drone-1", "--admin", admin)
	if code != 0 || !strings.Contains(out, "drone-1 disconnected") {
		t.Fatalf("clients kick: %d %q", code, out)
	}
	brokertest.Eventually(t, 5*time.Second, func() bool {
		_, out, _ := runCLI(t, "clients", "--admin", admin)
		return strings.TrimSpace(out) == "no clients connected"
	}, "the kicked client is gone")
}

func lineWith(s, part string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, part) {
			return l
		}
	}
	return ""
}
