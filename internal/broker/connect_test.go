package broker_test

import (
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func TestConnectCleanStartAndSessionPresentV5(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	p := n.ConnectV5(&paho.Connect{ClientID: "p", CleanStart: true, KeepAlive: 30})

	c, ack := rawConnect(t, n, connect5("c", true, 60))
	if ack.SessionPresent {
		t.Fatal("clean start: session present")
	}
	c.Subscribe(1, sub("t", 1))
	c.Send(&packet.Disconnect{})
	c.Closed()

	// Resume without clean start: the session and its subscription are there.
	c, ack = rawConnect(t, n, connect5("c", false, 60))
	if !ack.SessionPresent {
		t.Fatal("resumed session: session present not set")
	}
	p.Pub("t", 1, false, "kept")
	c.ExpectPublish("t", "kept")
	c.Send(&packet.Disconnect{})
	c.Closed()

	// Clean start discards it.
	c, ack = rawConnect(t, n, connect5("c", true, 60))
	if ack.SessionPresent {
		t.Fatal("clean start after a persistent session: session present")
	}
	p.Pub("t", 1, false, "gone")
	expectNothing(t, c, "subscription survived clean start")
	c.Send(&packet.Disconnect{})
	c.Closed()

	// Session expiry 0 (absent): the session ends with the connection.
	c, _ = rawConnect(t, n, connect5("e0", false, 0))
	c.Subscribe(1, sub("t", 1))
	c.Send(&packet.Disconnect{})
	c.Closed()
	c, ack = rawConnect(t, n, connect5("e0", false, 0))
	if ack.SessionPresent {
		t.Fatal("session with expiry 0 survived its connection")
	}
}

func TestConnectCleanSessionV3(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	pub := v5(n, "p")

	connect := func(clean bool) (*brokertest.V3, bool) {
		v := &brokertest.V3{T: t, Msgs: make(chan pahov3.Message, 16)}
		o := pahov3.NewClientOptions().AddBroker("tcp://" + n.MQTT()).SetClientID("c3").
			SetCleanSession(clean).SetProtocolVersion(4).SetAutoReconnect(false).
			SetDefaultPublishHandler(func(_ pahov3.Client, m pahov3.Message) { v.Msgs <- m })
		v.Client = pahov3.NewClient(o)
		tok := v.Connect()
		brokertest.Wait(t, tok, "v3 connect")
		return v, tok.(*pahov3.ConnectToken).SessionPresent()
	}
	c, present := connect(false)
	if present {
		t.Fatal("first connect: session present")
	}
	brokertest.Wait(t, c.Subscribe("t", 1, nil), "subscribe")
	c.Disconnect(100)

	pub.Pub("t", 1, false, "while away")
	c, present = connect(false)
	if !present {
		t.Fatal("clean session 0: session present not set")
	}
	if m := c.Next(); string(m.Payload()) != "while away" {
		t.Fatalf("got %q", m.Payload())
	}
	c.Disconnect(100)

	c, present = connect(true)
	if present {
		t.Fatal("clean session 1: session present")
	}
	c.Disconnect(100)
	// A clean session leaves nothing behind.
	c, present = connect(false)
	if present {
		t.Fatal("session of a clean-session connection survived it")
	}
	c.Disconnect(100)
}

func TestSessionExpiryInterval(t *testing.T) {
	clk := manualClock()
	n := brokertest.StartClock(t, brokertest.Config(t), clk)

	c, _ := rawConnect(t, n, connect5("c", true, 10))
	c.Subscribe(1, sub("t", 1))
	c.Send(&packet.Disconnect{})
	c.Closed()
	n.WaitSessions(0, 1)

	clk.Advance(9 * time.Second)
	c, ack := rawConnect(t, n, connect5("c", false, 10))
	if !ack.SessionPresent {
		t.Fatal("session ended before its expiry interval")
	}
	c.Send(&packet.Disconnect{})
	c.Closed()
	n.WaitSessions(0, 1)

	// The interval restarts at each disconnection.
	clk.Advance(9 * time.Second)
	if n.Broker().Stats().Sessions != 1 {
		t.Fatal("session ended early")
	}
	clk.Advance(2 * time.Second)
	if got := n.Broker().Stats().Sessions; got != 0 {
		t.Fatalf("%d sessions after the expiry interval", got)
	}
	c, ack = rawConnect(t, n, connect5("c", false, 10))
	if ack.SessionPresent {
		t.Fatal("session present after its expiry interval")
	}

	// DISCONNECT may change the interval (here to 0: end now).
	c.Subscribe(1, sub("t", 1))
	d := &packet.Disconnect{}
	d.Props.SetSessionExpiry(0)
	c.Send(d)
	c.Closed()
	brokertest.Eventually(t, 5*time.Second, func() bool { return n.Broker().Stats().Sessions == 0 }, "session ended by DISCONNECT expiry 0")
}

func TestAssignedClientIdentifier(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))

	v := n.ConnectV5(&paho.Connect{CleanStart: true, KeepAlive: 30})
	id := v.Connack.Properties.AssignedClientID
	if id == "" {
		t.Fatal("v5 empty client id: no Assigned Client Identifier")
	}
	v2 := n.ConnectV5(&paho.Connect{CleanStart: true, KeepAlive: 30})
	if v2.Connack.Properties.AssignedClientID == id {
		t.Fatal("two clients got the same assigned id")
	}
	// The assigned id names the session: reconnecting with it resumes it.
	r, ack := rawConnect(t, n, connect5("", false, 60))
	aid := ack.Props.AssignedClientID
	if aid == "" {
		t.Fatal("raw v5 empty client id: no Assigned Client Identifier")
	}
	r.Send(&packet.Disconnect{})
	r.Closed()
	_, ack = rawConnect(t, n, connect5(aid, false, 60))
	if !ack.SessionPresent {
		t.Fatal("session under the assigned id not found")
	}

	// 3.1.1: an empty id needs clean session.
	r3, ack3 := n.RawConnect(connect3("", false))
	if ack3.ReasonCode != packet.ClientIdentifierNotValid {
		t.Fatalf("3.1.1 empty id, clean 0: %s, want identifier rejected (0x02)", packet.Describe(ack3))
	}
	r3.ExpectClosedSilently()
	_, ack3 = rawConnect(t, n, connect3("", true))
	if ack3.Props.AssignedClientID != "" {
		t.Fatal("3.1.1 CONNACK carries properties")
	}
}

func TestConnack311RefusalIsReturnCode2OnTheWire(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	c := n.Dial()
	b, _ := connect3("", false).Append(nil, packet.V311)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(got); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x20, 0x02, 0x00, 0x02}; string(got) != string(want) {
		t.Fatalf("CONNACK bytes % x, want % x", got, want)
	}
}

func TestSessionTakeover(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	p := v5(n, "p")

	old, _ := rawConnect(t, n, connect5("dup", true, 60))
	old.Subscribe(1, sub("t", 1))
	nw, ack := rawConnect(t, n, connect5("dup", false, 60))
	old.ExpectDisconnect(packet.SessionTakenOver)
	if !ack.SessionPresent {
		t.Fatal("takeover without clean start: session present not set")
	}
	p.Pub("t", 1, false, "to the new one")
	nw.ExpectPublish("t", "to the new one")

	// 3.1.1: the old connection is closed (no DISCONNECT from a server).
	o3, _ := rawConnect(t, n, connect3("dup3", true))
	n3, _ := rawConnect(t, n, connect3("dup3", true))
	o3.ExpectClosedSilently()
	n3.Ping()

	// A v5 paho client sees the DISCONNECT 0x8E.
	pv := n.ConnectV5(&paho.Connect{ClientID: "pdup", CleanStart: true, KeepAlive: 30})
	rawConnect(t, n, connect5("pdup", true, 0))
	select {
	case d := <-pv.Disconnects:
		if d.ReasonCode != byte(packet.SessionTakenOver) {
			t.Fatalf("paho got DISCONNECT 0x%02x", d.ReasonCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("paho client not told of the takeover")
	}
}

func TestKeepAliveDropsSilentClientAndPublishesWill(t *testing.T) {
	t.Parallel() // waits on real keep-alive timeouts
	n := brokertest.Start(t, brokertest.Config(t))
	w := v5(n, "watcher")
	w.Sub("will/+", 1)

	cp := connect5("silent", true, 0)
	cp.KeepAlive = 1
	cp.WillFlag, cp.WillTopic, cp.WillPayload, cp.WillQoS = true, "will/silent", []byte("gone"), 1
	r, _ := rawConnect(t, n, cp)
	start := time.Now()
	r.ExpectDisconnect(packet.KeepAliveTimeout)
	if el := time.Since(start); el < time.Second {
		t.Fatalf("dropped after %v, before the keep alive", el)
	}
	if m := w.Next(); m.Topic != "will/silent" || string(m.Payload) != "gone" {
		t.Fatalf("will: %s", brokertest.String(m))
	}

	// 3.1.1: closed without a packet, will published too.
	cp3 := connect3("silent3", true)
	cp3.KeepAlive = 1
	cp3.WillFlag, cp3.WillTopic, cp3.WillPayload = true, "will/silent3", []byte("gone3")
	r3, _ := rawConnect(t, n, cp3)
	r3.ExpectClosedSilently()
	if m := w.Next(); m.Topic != "will/silent3" {
		t.Fatalf("will: %s", brokertest.String(m))
	}

	// A client that pings stays connected past 1.5x its keep alive.
	cp = connect5("pinger", true, 0)
	cp.KeepAlive = 1
	pr, _ := rawConnect(t, n, cp)
	deadline := time.Now().Add(2 * time.Second)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		<-tick.C
		pr.Ping()
	}
}

func TestServerKeepAlive(t *testing.T) {
	t.Parallel() // waits on real keep-alive timeouts
	cfg := brokertest.Config(t)
	cfg.MaxKeepAlive = 1
	n := brokertest.Start(t, cfg)

	for _, ask := range []uint16{60, 0} {
		cp := connect5("ka", true, 0)
		cp.KeepAlive = ask
		r, ack := rawConnect(t, n, cp)
		if !ack.Props.Has(packet.PropServerKeepAlive) || ack.Props.ServerKeepAlive != 1 {
			t.Fatalf("asked %d with max 1: %s", ask, packet.Describe(ack))
		}
		// The granted keep alive is enforced.
		r.ExpectDisconnect(packet.KeepAliveTimeout)
	}
	cp := connect5("ka", true, 0)
	cp.KeepAlive = 1
	r, ack := rawConnect(t, n, cp)
	if ack.Props.Has(packet.PropServerKeepAlive) {
		t.Fatalf("asked within the max: %s", packet.Describe(ack))
	}
	r.Send(&packet.Disconnect{})

	// paho sees it too.
	v := n.ConnectV5(&paho.Connect{ClientID: "pk", CleanStart: true, KeepAlive: 300})
	if ka := v.Connack.Properties.ServerKeepAlive; ka == nil || *ka != 1 {
		t.Fatalf("paho: server keep alive %v", ka)
	}
}

// TestConnectRefusals: CONNECTs the broker refuses with a reason code.
func TestConnectRefusals(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxClientIDLength = 8
	n := brokertest.Start(t, cfg)
	cp := connect5("c", true, 0)
	cp.Props.SetAuthMethod("SCRAM-SHA-1")
	r, ack := n.RawConnect(cp)
	if ack.ReasonCode != packet.BadAuthenticationMethod {
		t.Fatalf("auth method: %s", packet.Describe(ack))
	}
	r.ExpectClosedSilently()
	r, ack = n.RawConnect(connect5("much-too-long", true, 0))
	if ack.ReasonCode != packet.ClientIdentifierNotValid {
		t.Fatalf("long client id: %s", packet.Describe(ack))
	}
	r.ExpectClosedSilently()
	r, ack = n.RawConnect(connect3("much-too-long", true))
	if ack.ReasonCode != packet.ClientIdentifierNotValid {
		t.Fatalf("3.1.1 long client id: %s", packet.Describe(ack))
	}
	r.ExpectClosedSilently()
	cp = withWill(connect5("c", true, 0), "will/x", "\xff", 0, false, 0)
	cp.WillProps.SetPayloadFormat(1)
	r, ack = n.RawConnect(cp)
	if ack.ReasonCode != packet.PayloadFormatInvalid {
		t.Fatalf("will payload not UTF-8: %s", packet.Describe(ack))
	}
	r.ExpectClosedSilently()
}

// TestMaxSessionExpiry: a client asking for more than max-session-expiry
// gets the cap in CONNACK, and the session ends after the cap.
func TestMaxSessionExpiry(t *testing.T) {
	clk := manualClock()
	cfg := brokertest.Config(t)
	cfg.MaxSessionExpiry = time.Minute
	n := brokertest.StartClock(t, cfg, clk)
	r, ack := rawConnect(t, n, connect5("c", true, 3600))
	if !ack.Props.Has(packet.PropSessionExpiry) || ack.Props.SessionExpiry != 60 {
		t.Fatalf("CONNACK %s", packet.Describe(ack))
	}
	r.Send(&packet.Disconnect{})
	r.Closed()
	n.WaitSessions(0, 1)
	clk.Advance(61 * time.Second)
	if _, ack = rawConnect(t, n, connect5("c", false, 3600)); ack.SessionPresent {
		t.Fatal("session outlived max-session-expiry")
	}
	// 3.1.1 persistent sessions ("never expire") are capped too.
	r, _ = rawConnect(t, n, connect3("c3", false))
	r.Send(&packet.Disconnect{})
	r.Closed()
	n.WaitSessions(1, 1)
	clk.Advance(61 * time.Second)
	if _, ack = rawConnect(t, n, connect3("c3", false)); ack.SessionPresent {
		t.Fatal("3.1.1 session outlived max-session-expiry")
	}
}

// TestTakeoverKeepsInFlightMessages: a connection taking over a persistent
// session gets the messages the old one had not acknowledged, DUP set.
func TestTakeoverKeepsInFlightMessages(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	old, _ := rawConnect(t, n, connect5("s", true, 600))
	old.Subscribe(1, sub("t", 1))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, pub("t", 1, 0, "unacked"))
	m := old.ExpectPublish("t", "unacked")
	nw, _ := rawConnect(t, n, connect5("s", false, 600))
	old.ExpectDisconnect(packet.SessionTakenOver)
	r := nw.ExpectPublish("t", "unacked")
	if !r.Dup || r.PacketID != m.PacketID {
		t.Fatalf("after takeover: %s (first id %d)", packet.Describe(r), m.PacketID)
	}
	nw.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: r.PacketID})
	publishAcked(t, p, 2, pub("t", 1, 0, "next"))
	nw.ExpectPublish("t", "next")
}

// TestServerDisconnectRightAfterConnack: a DISCONNECT the broker sends while
// the connection's reader is between packets (here: a shutdown at once
// after CONNACK, before the reader is back in its read) must reach the
// client before the socket closes. The window is narrow, so the test tries
// it many times.
func TestServerDisconnectRightAfterConnack(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.WSAddr, cfg.AdminAddr = "", ""
	for i := 0; i < 50; i++ {
		n := brokertest.Start(t, cfg)
		c, _ := rawConnect(t, n, connect5("c", true, 0))
		n.Stop()
		c.ExpectDisconnect(packet.ServerShuttingDown)
	}
}
