package mqttclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
	"github.com/sextantmq/sextant/internal/mqttclient/mqttclienttest"
)

// msg is a received message, copied out of the reader's buffer.
type msg struct {
	topic   string
	qos     byte
	retain  bool
	payload string
	user    []packet.UserProperty
}

type inbox chan msg

func (in inbox) handler() mqttclient.Handler {
	return func(p *packet.Publish) {
		in <- msg{topic: p.Topic, qos: p.QoS, retain: p.Retain, payload: string(p.Payload),
			user: append([]packet.UserProperty(nil), p.Props.User...)}
	}
}

func (in inbox) next(t *testing.T) msg {
	t.Helper()
	select {
	case m := <-in:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
		return msg{}
	}
}

type target struct {
	name string
	addr string
}

// brokers starts Sextant in-process and Mosquitto (skipped if missing).
func brokers(t *testing.T) []target {
	t.Helper()
	n := brokertest.Start(t, brokertest.Config(t))
	out := []target{{"sextant", n.MQTT()}}
	if _, ok := mqttclienttest.MosquittoBinary(t); ok {
		out = append(out, target{"mosquitto", mqttclienttest.StartMosquitto(t).Addr()})
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, addr string, o mqttclient.Options) *mqttclient.Client {
	t.Helper()
	c, err := mqttclient.Dial(ctxT(t), addr, o)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func subscribe(t *testing.T, c *mqttclient.Client, filter string, qos byte) {
	t.Helper()
	if _, err := c.Subscribe(ctxT(t), &packet.Subscribe{Subs: []packet.Subscription{{Filter: filter, QoS: qos}}}); err != nil {
		t.Fatalf("subscribe %q: %v", filter, err)
	}
}

func versions() []packet.Version { return []packet.Version{packet.V311, packet.V5} }

func TestPublishSubscribeEveryQoS(t *testing.T) {
	for _, b := range brokers(t) {
		for _, v := range versions() {
			for qos := byte(0); qos <= 2; qos++ {
				t.Run(fmt.Sprintf("%s/v%s/qos%d", b.name, v, qos), func(t *testing.T) {
					in := make(inbox, 1000)
					topic := fmt.Sprintf("rt/%s/%d/%d", b.name, v, qos)
					sub := dial(t, b.addr, mqttclient.Options{Version: v, ClientID: "sub-" + topic, OnPublish: in.handler()})
					subscribe(t, sub, topic, qos)
					pub := dial(t, b.addr, mqttclient.Options{Version: v, ClientID: "pub-" + topic, MaxInflight: 8})
					const n = 200
					var wg sync.WaitGroup
					errs := make(chan error, n)
					for i := range n {
						p := &packet.Publish{Topic: topic, QoS: qos, Payload: []byte(fmt.Sprint(i))}
						if qos > 0 {
							wg.Add(1)
						}
						if err := pub.PublishAsync(ctxT(t), p, func(err error) {
							if err != nil {
								errs <- err
							}
							wg.Done()
						}); err != nil {
							t.Fatalf("publish %d: %v", i, err)
						}
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						t.Errorf("acknowledgement: %v", err)
					}
					for i := range n {
						m := in.next(t)
						if m.topic != topic || m.payload != fmt.Sprint(i) || m.qos != qos {
							t.Fatalf("message %d: got %+v", i, m)
						}
					}
					if err := pub.Disconnect(ctxT(t), nil); err != nil {
						t.Errorf("disconnect: %v", err)
					}
				})
			}
		}
	}
}

func TestWillIsPublishedOnAbruptClose(t *testing.T) {
	for _, b := range brokers(t) {
		for _, v := range versions() {
			t.Run(fmt.Sprintf("%s/v%s", b.name, v), func(t *testing.T) {
				in := make(inbox, 10)
				topic := fmt.Sprintf("will/%s/%d", b.name, v)
				watcher := dial(t, b.addr, mqttclient.Options{Version: v, ClientID: "w-" + topic, OnPublish: in.handler()})
				subscribe(t, watcher, topic, 1)
				will := &mqttclient.Will{Topic: topic, Payload: []byte("gone"), QoS: 1}
				if v == packet.V5 {
					will.Props.User = []packet.UserProperty{{Key: "k", Value: "v"}}
				}
				c := dial(t, b.addr, mqttclient.Options{Version: v, ClientID: "d-" + topic, Will: will, KeepAlive: 30 * time.Second})
				c.Close()
				m := in.next(t)
				if m.payload != "gone" || m.topic != topic {
					t.Fatalf("will: got %+v", m)
				}
				if v == packet.V5 && (len(m.user) != 1 || m.user[0].Key != "k") {
					t.Errorf("will user property lost: %+v", m.user)
				}
			})
		}
	}
}

func TestPersistentSessionReceivesWhileAway(t *testing.T) {
	for _, b := range brokers(t) {
		for _, v := range versions() {
			t.Run(fmt.Sprintf("%s/v%s", b.name, v), func(t *testing.T) {
				topic := fmt.Sprintf("persist/%s/%d", b.name, v)
				o := mqttclient.Options{Version: v, ClientID: "p-" + topic, KeepSession: true}
				o.Props.SetSessionExpiry(300)
				// Start from a clean slate, then keep the session.
				clean := dial(t, b.addr, mqttclient.Options{Version: v, ClientID: o.ClientID})
				clean.Disconnect(ctxT(t), nil)
				s := dial(t, b.addr, o)
				subscribe(t, s, topic, 1)
				if err := s.Disconnect(ctxT(t), nil); err != nil {
					t.Fatal(err)
				}
				pub := dial(t, b.addr, mqttclient.Options{Version: v, ClientID: "pp-" + topic})
				if err := pub.Publish(ctxT(t), &packet.Publish{Topic: topic, QoS: 1, Payload: []byte("queued")}); err != nil {
					t.Fatal(err)
				}
				in := make(inbox, 10)
				o.OnPublish = in.handler()
				s2 := dial(t, b.addr, o)
				if !s2.Server().SessionPresent {
					t.Error("session not present on reconnect")
				}
				if m := in.next(t); m.payload != "queued" {
					t.Fatalf("got %+v", m)
				}
			})
		}
	}
}

func TestTopicAliasesBothWays(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	var mu sync.Mutex
	var aliasOnlyOut, aliasOnlyIn int
	in := make(inbox, 100)
	so := mqttclient.Options{ClientID: "alias-sub", OnPublish: in.handler(), Trace: func(out bool, p packet.Packet) {
		if pub, ok := p.(*packet.Publish); ok && !out && pub.Topic == "" && pub.Props.Has(packet.PropTopicAlias) {
			mu.Lock()
			aliasOnlyIn++
			mu.Unlock()
		}
	}}
	so.Props.SetTopicAliasMaximum(4)
	sub := dial(t, n.MQTT(), so)
	subscribe(t, sub, "alias/#", 1)
	pub := dial(t, n.MQTT(), mqttclient.Options{ClientID: "alias-pub", TopicAliases: true, Trace: func(out bool, p packet.Packet) {
		if pub, ok := p.(*packet.Publish); ok && out && pub.Topic == "" {
			mu.Lock()
			aliasOnlyOut++
			mu.Unlock()
		}
	}})
	if pub.Server().TopicAliasMaximum == 0 {
		t.Fatal("broker announced no topic aliases")
	}
	for i := range 6 {
		topic := fmt.Sprintf("alias/%d", i%2)
		if err := pub.Publish(ctxT(t), &packet.Publish{Topic: topic, QoS: 1, Payload: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		if m := in.next(t); m.topic != fmt.Sprintf("alias/%d", i%2) || m.payload != string([]byte{byte(i)}) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if aliasOnlyOut != 4 {
		t.Errorf("publishes sent with only an alias: %d, want 4", aliasOnlyOut)
	}
	if aliasOnlyIn == 0 {
		t.Error("the broker never sent an alias-only publish; inbound alias resolution untested")
	}
}

func TestWebSocket(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	in := make(inbox, 10)
	c := dial(t, "ws://"+n.Addr("ws")+"/mqtt", mqttclient.Options{ClientID: "ws", OnPublish: in.handler()})
	subscribe(t, c, "ws/t", 2)
	if err := c.Publish(ctxT(t), &packet.Publish{Topic: "ws/t", QoS: 2, Payload: []byte("over ws")}); err != nil {
		t.Fatal(err)
	}
	if m := in.next(t); m.payload != "over ws" {
		t.Fatalf("got %+v", m)
	}
	if err := c.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestConnectRefused(t *testing.T) {
	b := mqttclienttest.Start(t, mqttclienttest.Faults{RefuseCode: packet.NotAuthorized})
	for _, v := range versions() {
		_, err := mqttclient.Dial(ctxT(t), b.Addr(), mqttclient.Options{Version: v, ClientID: "x"})
		var re *mqttclient.ReasonError
		if !errors.As(err, &re) || re.Packet != packet.CONNACK || re.Code != packet.NotAuthorized || !errors.Is(err, mqttclient.ErrRefused) {
			t.Errorf("v%s: got %v, want a CONNACK refusal NotAuthorized", v, err)
		}
	}
}

func TestUnreachableBroker(t *testing.T) {
	b := mqttclienttest.Start(t, mqttclienttest.Faults{})
	addr := b.Addr()
	b.Close()
	_, err := mqttclient.Dial(ctxT(t), addr, mqttclient.Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("got %v", err)
	}
}

func TestSubscribeRefusal(t *testing.T) {
	b := mqttclienttest.Start(t, mqttclienttest.Faults{})
	c := dial(t, b.Addr(), mqttclient.Options{ClientID: "s"})
	_, err := c.Subscribe(ctxT(t), &packet.Subscribe{Subs: []packet.Subscription{{Filter: "ok/+"}, {Filter: "bad/#/x"}}})
	var re *mqttclient.ReasonError
	if !errors.As(err, &re) || re.Code != packet.TopicFilterInvalid || !strings.Contains(re.Reason, "bad/#/x") {
		t.Fatalf("got %v", err)
	}
	ua, err := c.Unsubscribe(ctxT(t), &packet.Unsubscribe{Filters: []string{"ok/+"}})
	if err != nil || len(ua.Codes) != 1 {
		t.Fatalf("unsubscribe: %v %+v", err, ua)
	}
}

func TestAssignedClientID(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	c := dial(t, n.MQTT(), mqttclient.Options{})
	if c.Server().AssignedClientID == "" {
		t.Fatal("no assigned client id")
	}
}

func TestInvalidPublishLeavesClientUsable(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	c := dial(t, n.MQTT(), mqttclient.Options{ClientID: "q"})
	err := c.Publish(ctxT(t), &packet.Publish{Topic: "a/#", QoS: 1})
	if err == nil || !errors.Is(err, packet.ErrProtocol) && !errors.Is(err, packet.ErrMalformed) {
		t.Fatalf("publish to a wildcard topic: %v", err)
	}
	if err := c.Publish(ctxT(t), &packet.Publish{Topic: "a", QoS: 1}); err != nil {
		t.Fatalf("the client is still usable: %v", err)
	}
}
