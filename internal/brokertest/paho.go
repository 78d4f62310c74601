package brokertest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"
)

// V5 is a paho MQTT 5 client connected to a node, collecting what it receives.
type V5 struct {
	*paho.Client
	T           testing.TB
	Msgs        chan *paho.Publish
	Disconnects chan *paho.Disconnect
	Connack     *paho.Connack
}

// ConnectV5 connects a paho v5 client with cp (ClientID etc.). The client is
// disconnected when the test ends.
func (n *Node) ConnectV5(cp *paho.Connect) *V5 {
	n.T.Helper()
	c, err := n.TryConnectV5(cp, nil)
	if err != nil {
		n.T.Fatalf("brokertest: v5 connect %q: %v", cp.ClientID, err)
	}
	return c
}

// TryConnectV5 connects a paho v5 client and returns the error, if any.
// tweak may adjust the client config (e.g. manual acknowledgement).
func (n *Node) TryConnectV5(cp *paho.Connect, tweak func(*paho.ClientConfig)) (*V5, error) {
	return TryConnectV5To(n.T, n.Dial(), cp, tweak)
}

// TryConnectV5To connects a paho v5 client over an open connection (to a
// node in another process, or over WebSocket).
func TryConnectV5To(t testing.TB, conn net.Conn, cp *paho.Connect, tweak func(*paho.ClientConfig)) (*V5, error) {
	v := &V5{T: t, Msgs: make(chan *paho.Publish, 100000), Disconnects: make(chan *paho.Disconnect, 4)}
	cfg := paho.ClientConfig{
		Conn: conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			v.Msgs <- pr.Packet
			return true, nil
		}},
		OnServerDisconnect: func(d *paho.Disconnect) { v.Disconnects <- d },
		OnClientError:      func(error) {},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	v.Client = paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := v.Client.Connect(ctx, cp)
	v.Connack = ack
	if err != nil {
		return v, err
	}
	t.Cleanup(func() { _ = v.Client.Disconnect(&paho.Disconnect{}) })
	return v, nil
}

// Sub subscribes to filter at qos and fails the test on error.
func (v *V5) Sub(filter string, qos byte) *paho.Suback {
	v.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sa, err := v.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: qos}}})
	if err != nil {
		v.T.Fatalf("brokertest: subscribe %q: %v", filter, err)
	}
	return sa
}

// Pub publishes and fails the test on error.
func (v *V5) Pub(topic string, qos byte, retain bool, payload string) *paho.PublishResponse {
	v.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := v.Publish(ctx, &paho.Publish{Topic: topic, QoS: qos, Retain: retain, Payload: []byte(payload)})
	if err != nil {
		v.T.Fatalf("brokertest: publish %q: %v", topic, err)
	}
	return r
}

// Next waits for the next received message.
func (v *V5) Next() *paho.Publish {
	v.T.Helper()
	select {
	case m := <-v.Msgs:
		return m
	case <-time.After(5 * time.Second):
		v.T.Fatal("brokertest: no message received within 5s")
		return nil
	}
}

// ExpectNone checks that no message arrives before a barrier: it publishes
// to a private topic and waits for that to come back, so everything sent
// before it has been delivered.
func (v *V5) ExpectNone(barrierTopic string) {
	v.T.Helper()
	v.Sub(barrierTopic, 0)
	v.Pub(barrierTopic, 0, false, "barrier")
	m := v.Next()
	if m.Topic != barrierTopic {
		v.T.Fatalf("brokertest: unexpected message on %q: %q", m.Topic, m.Payload)
	}
}

// V3 is a paho MQTT 3.1.1 client with a channel of received messages.
type V3 struct {
	pahov3.Client
	T    testing.TB
	Msgs chan pahov3.Message
}

// ConnectV3 connects a paho 3.1.1 client; opts may adjust the options.
func (n *Node) ConnectV3(clientID string, clean bool, opts func(*pahov3.ClientOptions)) *V3 {
	n.T.Helper()
	return ConnectV3To(n.T, "tcp://"+n.MQTT(), clientID, clean, opts)
}

// ConnectV3To connects a paho 3.1.1 client to a broker URL (tcp://host:port).
func ConnectV3To(t testing.TB, url, clientID string, clean bool, opts func(*pahov3.ClientOptions)) *V3 {
	t.Helper()
	v := &V3{T: t, Msgs: make(chan pahov3.Message, 100000)}
	o := pahov3.NewClientOptions().AddBroker(url).SetClientID(clientID).
		SetCleanSession(clean).SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false).
		SetOrderMatters(true).SetDefaultPublishHandler(func(_ pahov3.Client, m pahov3.Message) { v.Msgs <- m })
	if opts != nil {
		opts(o)
	}
	v.Client = pahov3.NewClient(o)
	tok := v.Connect()
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("brokertest: v3 connect %q: %v", clientID, tok.Error())
	}
	t.Cleanup(func() { v.Disconnect(100) })
	return v
}

// Wait waits for a token and fails the test on error.
func Wait(t testing.TB, tok pahov3.Token, what string) {
	t.Helper()
	if !tok.WaitTimeout(5 * time.Second) {
		t.Fatalf("brokertest: %s timed out", what)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("brokertest: %s: %v", what, err)
	}
}

// Next waits for the next message.
func (v *V3) Next() pahov3.Message {
	v.T.Helper()
	select {
	case m := <-v.Msgs:
		return m
	case <-time.After(5 * time.Second):
		v.T.Fatal("brokertest: no message received within 5s")
		return nil
	}
}

// String describes a v5 publish for failure messages.
func String(p *paho.Publish) string {
	return fmt.Sprintf("%s q%d r%v %q", p.Topic, p.QoS, p.Retain, p.Payload)
}
