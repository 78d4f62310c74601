package broker_test

import (
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func withWill(cp *packet.Connect, topic, payload string, qos byte, retain bool, delay uint32) *packet.Connect {
	cp.WillFlag, cp.WillTopic, cp.WillPayload, cp.WillQoS, cp.WillRetain = true, topic, []byte(payload), qos, retain
	if delay > 0 {
		cp.WillProps.SetWillDelay(delay)
	}
	return cp
}

// expectNoWill checks, after the broker finished handling a disconnection,
// that the watcher got nothing: a message published after it on a barrier
// topic is the next thing the watcher receives.
func expectNoWill(t *testing.T, w *brokertest.Raw, p *brokertest.Raw) {
	t.Helper()
	publishAcked(t, p, 999, pub("barrier", 1, 0, "b"))
	m := brokertest.Expect[*packet.Publish](w)
	if m.Topic != "barrier" {
		t.Fatalf("unexpected %s", packet.Describe(m))
	}
	if m.QoS > 0 {
		w.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}
}

func watcher(t *testing.T, n *brokertest.Node) (w, p *brokertest.Raw) {
	w, _ = rawConnect(t, n, connect5("watcher", true, 0))
	w.Subscribe(1, sub("will/#", 0), sub("barrier", 0))
	p, _ = rawConnect(t, n, connect5("barrier-pub", true, 0))
	return w, p
}

func TestWillOnAbnormalAndNotOnNormalDisconnect(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	w, p := watcher(t, n)
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		// Abnormal: the socket just closes.
		cp := withWill(connect5("c", true, 0), "will/c", "abnormal", 0, false, 0)
		cp.Version = v
		c, _ := rawConnect(t, n, cp)
		c.Close()
		w.ExpectPublish("will/c", "abnormal")

		// Normal DISCONNECT: no will.
		cp = withWill(connect5("c", true, 0), "will/c", "normal", 0, false, 0)
		cp.Version = v
		c, _ = rawConnect(t, n, cp)
		c.Send(&packet.Disconnect{})
		c.Closed()
		n.WaitSessions(2, 0)
		expectNoWill(t, w, p)

		// A protocol violation is an abnormal end.
		cp = withWill(connect5("c", true, 0), "will/c", "violation", 0, false, 0)
		cp.Version = v
		c, _ = rawConnect(t, n, cp)
		c.Send(&packet.Connect{ProtocolName: "MQTT", Version: v, ClientID: "c", CleanStart: true})
		c.Closed()
		w.ExpectPublish("will/c", "violation")
	}

	// v5 DISCONNECT 0x04: disconnect with will message.
	c, _ := rawConnect(t, n, withWill(connect5("c", true, 0), "will/c", "asked", 0, false, 0))
	c.Send(&packet.Disconnect{ReasonCode: packet.DisconnectWithWill})
	c.Closed()
	w.ExpectPublish("will/c", "asked")

	// Session takeover ends the old connection abnormally.
	c, _ = rawConnect(t, n, withWill(connect5("c", true, 0), "will/c", "taken over", 0, false, 0))
	c2, _ := rawConnect(t, n, connect5("c", true, 0))
	c.Closed()
	w.ExpectPublish("will/c", "taken over")
	c2.Send(&packet.Disconnect{})
}

func TestWillDelayInterval(t *testing.T) {
	clk := manualClock()
	n := brokertest.StartClock(t, brokertest.Config(t), clk)
	w, p := watcher(t, n)

	// Published after the delay.
	c, _ := rawConnect(t, n, withWill(connect5("d", true, 60), "will/d", "late", 0, false, 10))
	c.Close()
	n.WaitSessions(2, 1)
	clk.Advance(9 * time.Second)
	expectNoWill(t, w, p)
	clk.Advance(time.Second)
	w.ExpectPublish("will/d", "late")

	// Cancelled when the client comes back in time.
	c, _ = rawConnect(t, n, withWill(connect5("d", true, 60), "will/d", "cancelled", 0, false, 10))
	c.Close()
	n.WaitSessions(2, 1)
	clk.Advance(5 * time.Second)
	c, _ = rawConnect(t, n, connect5("d", false, 60))
	clk.Advance(30 * time.Second)
	expectNoWill(t, w, p)
	c.Send(&packet.Disconnect{})
	c.Closed()
	n.WaitSessions(2, 1)

	// The session ends before the delay: the will goes when it ends.
	c, _ = rawConnect(t, n, withWill(connect5("e", true, 5), "will/e", "session end", 0, false, 100))
	c.Close()
	n.WaitSessions(2, 2)
	clk.Advance(4 * time.Second)
	expectNoWill(t, w, p)
	clk.Advance(time.Second)
	w.ExpectPublish("will/e", "session end")

	// A non-persistent session ends at once: so does the wait.
	c, _ = rawConnect(t, n, withWill(connect5("f", true, 0), "will/f", "now", 0, false, 100))
	c.Close()
	w.ExpectPublish("will/f", "now")
}

// TestWillPropertiesAndRetain: the will's properties reach subscribers, and
// a retained will is kept as the topic's retained message.
func TestWillPropertiesAndRetain(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	w, _ := watcher(t, n)
	cp := withWill(connect5("c", true, 0), "will/props", `{"bye":1}`, 1, true, 0)
	cp.WillProps.SetContentType("application/json")
	cp.WillProps.SetPayloadFormat(1)
	cp.WillProps.SetResponseTopic("reply/here")
	cp.WillProps.SetCorrelationData([]byte{1, 2, 3})
	cp.WillProps.SetMessageExpiry(3600)
	cp.WillProps.User = []packet.UserProperty{{Key: "k", Value: "v1"}, {Key: "k", Value: "v2"}, {Key: "other", Value: ""}}
	c, _ := rawConnect(t, n, cp)
	c.Close()

	m := w.ExpectPublish("will/props", `{"bye":1}`)
	pr := &m.Props
	if pr.ContentType != "application/json" || pr.PayloadFormat != 1 || pr.ResponseTopic != "reply/here" ||
		string(pr.CorrelationData) != "\x01\x02\x03" || !pr.Has(packet.PropMessageExpiry) || pr.MessageExpiry > 3600 || pr.MessageExpiry < 3590 {
		t.Fatalf("will properties: %s", packet.Describe(m))
	}
	if len(pr.User) != 3 || pr.User[0] != (packet.UserProperty{Key: "k", Value: "v1"}) || pr.User[1].Value != "v2" || pr.User[2].Key != "other" {
		t.Fatalf("will user properties: %v", pr.User)
	}

	// Retained: a later subscriber (paho) gets it with retain set.
	s := n.ConnectV5(&paho.Connect{ClientID: "late", CleanStart: true, KeepAlive: 30})
	s.Sub("will/props", 1)
	got := s.Next()
	if !got.Retain || string(got.Payload) != `{"bye":1}` || got.Properties.ContentType != "application/json" {
		t.Fatalf("retained will: %s %+v", brokertest.String(got), got.Properties)
	}
	if len(got.Properties.User) != 3 || got.Properties.User.Get("k") != "v1" {
		t.Fatalf("retained will user properties via paho: %v", got.Properties.User)
	}
}

// TestWillOnTakeoverWithDelay: a takeover that continues the session is not
// the end of the session: a delayed will is not published. A takeover with
// clean start ends the session: the will goes.
func TestWillOnTakeoverWithDelay(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	w, p := watcher(t, n)
	rawConnect(t, n, withWill(connect5("c", true, 600), "will/c", "kept session", 0, false, 30))
	c2, _ := rawConnect(t, n, connect5("c", false, 600))
	expectNoWill(t, w, p)
	c2.Close() // c2 has no will
	n.WaitSessions(2, 1)
	expectNoWill(t, w, p)

	rawConnect(t, n, withWill(connect5("d", true, 600), "will/d", "clean start", 0, false, 30))
	rawConnect(t, n, connect5("d", true, 600))
	w.ExpectPublish("will/d", "clean start")
}
