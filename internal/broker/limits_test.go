package broker_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestClientThatSendsButDoesNotReadIsDropped: a client that keeps sending
// requests but never reads fills the socket, then the broker's response
// queue, at which point the broker stops reading it. When the write times
// out the connection must still end (its will published), not hang with
// its reader parked forever.
func TestClientThatSendsButDoesNotReadIsDropped(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.WriteTimeout = time.Second
	n := brokertest.Start(t, cfg)
	w := v5(n, "watcher")
	w.Sub("will/#", 0)

	c := n.Dial()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	r := brokertest.NewRaw(t, c, packet.V5)
	cp := connect5("deaf", true, 0)
	cp.WillFlag, cp.WillTopic, cp.WillPayload = true, "will/deaf", []byte("x")
	r.Send(cp)
	brokertest.Expect[*packet.Connack](r)
	r.Subscribe(1, sub("flood", 0))
	r.Pause() // from now on the client reads nothing

	// Fill the socket with deliveries the client does not read.
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	big := bytes.Repeat([]byte("x"), 64<<10)
	for i := 0; i < 200; i++ {
		p.Send(&packet.Publish{Topic: "flood", Payload: big})
	}
	// Then more requests than the broker keeps responses for.
	pings := bytes.Repeat([]byte{0xc0, 0x00}, 5000)
	_ = r.SendBytes(pings)

	if m := w.Next(); m.Topic != "will/deaf" {
		t.Fatalf("got %s", brokertest.String(m))
	}
}
