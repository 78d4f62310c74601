package node_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/sextantmq/sextant/internal/brokertest"
)

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func subscriber(t *testing.T, addr string, clean bool) *brokertest.V5 {
	t.Helper()
	v, err := brokertest.TryConnectV5To(t, dial(t, addr), &paho.Connect{
		ClientID: "durable-sub", CleanStart: clean, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))},
	}, nil)
	if err != nil {
		t.Fatalf("subscriber connect: %v", err)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

// TestKill9KeepsAcknowledgedMessages is the durability check on the real
// binary: a persistent QoS 1 subscriber is offline while a publisher sends N
// QoS 1 messages, every one acknowledged; the broker process is then killed
// with SIGKILL (fsync always) and restarted on the same data directory; the
// subscriber reconnects and receives all N, in order.
func TestKill9KeepsAcknowledgedMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the sextant binary")
	}
	bin := brokertest.BuildSextant(t)
	dir := t.TempDir()
	addr := brokertest.FreeAddr(t)
	args := []string{"--data-dir", dir, "--fsync", "always", "--log-level", "warn", "--max-keepalive", "20"}
	p := brokertest.StartProcess(t, bin, addr, args...)

	s := subscriber(t, addr, true)
	if ka := s.Connack.Properties.ServerKeepAlive; ka == nil || *ka != 20 {
		t.Fatalf("--max-keepalive 20: server keep alive %v", ka)
	}
	s.Sub("k9/#", 1)
	if err := s.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}

	const n = 500
	pub := brokertest.ConnectV3To(t, "tcp://"+addr, "k9-pub", true, nil)
	toks := make([]pahov3.Token, n)
	for i := range toks {
		toks[i] = pub.Publish(fmt.Sprintf("k9/%d", i%7), 1, false, fmt.Sprint(i))
	}
	for i, tok := range toks {
		brokertest.Wait(t, tok, fmt.Sprint("publish ", i))
	}

	p.Kill() // every message above was acknowledged
	p = brokertest.StartProcess(t, bin, addr, args...)

	s = subscriber(t, addr, false)
	if !s.Connack.SessionPresent {
		t.Fatal("session lost across kill -9")
	}
	for i := 0; i < n; i++ {
		select {
		case m := <-s.Msgs:
			if string(m.Payload) != fmt.Sprint(i) {
				t.Fatalf("message %d: got %q (lost or reordered)", i, m.Payload)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %d acknowledged messages", i, n)
		}
	}

	// SIGTERM: a graceful shutdown tells v5 clients 0x8B.
	p.Stop()
	select {
	case d := <-s.Disconnects:
		if d.ReasonCode != 0x8B {
			t.Fatalf("DISCONNECT 0x%02x on SIGTERM", d.ReasonCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no DISCONNECT on SIGTERM")
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d after SIGTERM\n%s", code, p.Output())
	}
}
