package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestWebSocketListener: an MQTT 5 client over ws://.../mqtt (subprotocol
// mqtt) publishes and subscribes across to TCP clients; paho's 3.1.1 client
// does the same with its own WebSocket transport.
func TestWebSocketListener(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc, resp, err := websocket.Dial(ctx, "ws://"+n.Addr("ws")+"/mqtt", &websocket.DialOptions{Subprotocols: []string{"mqtt"}})
	if err != nil {
		t.Fatalf("websocket dial: %v", err)
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != "mqtt" {
		t.Fatalf("subprotocol %q", resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	// Every Write is one WebSocket message and paho writes a packet in
	// several: it needs a lock to keep its goroutines' packets whole.
	nc := packets.NewThreadSafeConn(websocket.NetConn(context.Background(), wc, websocket.MessageBinary))
	t.Cleanup(func() { nc.Close() })
	ws, err := brokertest.TryConnectV5To(t, nc, &paho.Connect{ClientID: "ws5", CleanStart: true, KeepAlive: 30}, nil)
	if err != nil {
		t.Fatalf("v5 over websocket: %v", err)
	}
	ws.Sub("ws/#", 2)

	tcp, _ := rawConnect(t, n, connect5("tcp", true, 0))
	tcp.Subscribe(1, sub("from/ws", 1))
	publishAcked(t, tcp, 1, pub("ws/in", 2, 0, "over tcp"))
	if m := ws.Next(); m.Topic != "ws/in" || string(m.Payload) != "over tcp" || m.QoS != 2 {
		t.Fatalf("websocket client got %s", brokertest.String(m))
	}
	ws.Pub("from/ws", 1, false, "over websocket")
	m := tcp.ExpectPublish("from/ws", "over websocket")
	tcp.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})

	v3 := brokertest.ConnectV3To(t, "ws://"+n.Addr("ws")+"/mqtt", "ws3", true, nil)
	brokertest.Wait(t, v3.Subscribe("ws/#", 1, nil), "v3 subscribe over websocket")
	publishAcked(t, tcp, 2, pub("ws/both", 1, 0, "to both"))
	if m := v3.Next(); string(m.Payload()) != "to both" {
		t.Fatalf("3.1.1 websocket client got %q", m.Payload())
	}
	if m := ws.Next(); string(m.Payload) != "to both" {
		t.Fatalf("v5 websocket client got %s", brokertest.String(m))
	}
	brokertest.Wait(t, v3.Publish("from/ws", 1, false, "v3 over websocket"), "v3 publish")
	m = tcp.ExpectPublish("from/ws", "v3 over websocket")
	tcp.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
}
