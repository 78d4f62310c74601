package broker_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func subID(id uint32) packet.Properties {
	var p packet.Properties
	p.SubscriptionIDs = []uint32{id}
	return p
}

// TestOverlappingSubscriptions: a message matching several subscriptions of
// one client is delivered once, at the highest granted QoS, carrying every
// matching subscription identifier.
func TestOverlappingSubscriptions(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.SubscribeProps(1, subID(1), sub("o/+", 1))
	s.SubscribeProps(2, subID(2), sub("o/#", 2))
	s.Subscribe(3, sub("o/x", 0)) // no identifier
	s.SubscribeProps(4, subID(4), sub("o/y", 2))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, pub("o/x", 2, 0, "x"))
	got := drain(t, s)
	if len(got) != 1 {
		t.Fatalf("%d deliveries of one message to overlapping subscriptions", len(got))
	}
	m := got[0]
	ids := slices.Clone(m.Props.SubscriptionIDs)
	slices.Sort(ids)
	if m.QoS != 2 || !slices.Equal(ids, []uint32{1, 2}) {
		t.Fatalf("got %s, want QoS 2 with subscription ids 1 and 2", packet.Describe(m))
	}

	// 3.1.1: once, at the highest QoS.
	s3, _ := rawConnect(t, n, connect3("s3", true))
	s3.Subscribe(1, sub("o/+", 0), sub("o/#", 1), sub("#", 0))
	publishAcked(t, p, 2, pub("o/z", 2, 0, "z"))
	if got := drain(t, s3); len(got) != 1 || got[0].QoS != 1 {
		t.Fatalf("3.1.1 overlapping: %d deliveries, first %v", len(got), got)
	}
}

// TestSubscriptionIdentifiers: the identifier of the matching subscription
// is attached, replaced when the subscription is replaced, and sent with
// retained messages; paho reads it too.
func TestSubscriptionIdentifiers(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, retained("id/r", 1, "retained"))

	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.SubscribeProps(1, subID(77), sub("id/#", 1))
	if m := brokertest.Expect[*packet.Publish](s); !slices.Equal(m.Props.SubscriptionIDs, []uint32{77}) {
		t.Fatalf("retained: %s", packet.Describe(m))
	}
	publishAcked(t, p, 2, pub("id/a", 0, 0, "a"))
	if m := s.ExpectPublish("id/a", "a"); !slices.Equal(m.Props.SubscriptionIDs, []uint32{77}) {
		t.Fatalf("live: %s", packet.Describe(m))
	}
	// Re-subscribing replaces the options, identifier included.
	s.SubscribeProps(2, subID(78), packet.Subscription{Filter: "id/#", QoS: 1, RetainHandling: 2})
	publishAcked(t, p, 3, pub("id/a", 0, 0, "b"))
	if m := s.ExpectPublish("id/a", "b"); !slices.Equal(m.Props.SubscriptionIDs, []uint32{78}) {
		t.Fatalf("replaced: %s", packet.Describe(m))
	}
	// Without an identifier, none is sent.
	s.Subscribe(3, packet.Subscription{Filter: "id/#", QoS: 1, RetainHandling: 2})
	publishAcked(t, p, 4, pub("id/a", 0, 0, "c"))
	if m := s.ExpectPublish("id/a", "c"); len(m.Props.SubscriptionIDs) != 0 {
		t.Fatalf("no identifier: %s", packet.Describe(m))
	}

	v := n.ConnectV5(&paho.Connect{ClientID: "paho", CleanStart: true, KeepAlive: 30})
	ctx, cancel := ctx5()
	defer cancel()
	if _, err := v.Subscribe(ctx, &paho.Subscribe{Properties: &paho.SubscribeProperties{SubscriptionIdentifier: intp(9)},
		Subscriptions: []paho.SubscribeOptions{{Topic: "id/p", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	publishAcked(t, p, 5, pub("id/p", 1, 0, "p"))
	if m := v.Next(); m.Properties.SubscriptionIdentifier == nil || *m.Properties.SubscriptionIdentifier != 9 {
		t.Fatalf("paho: subscription identifier %v", m.Properties.SubscriptionIdentifier)
	}
}

// TestNoLocal: with No Local a client does not receive its own messages.
func TestNoLocal(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	c, _ := rawConnect(t, n, connect5("c", true, 0))
	c.Subscribe(1, packet.Subscription{Filter: "nl/#", QoS: 1, NoLocal: true})
	c.Subscribe(2, sub("echo", 1))
	c.Send(pub("nl/a", 0, 0, "own"))
	c.Send(pub("echo", 0, 0, "own echo"))
	c.ExpectPublish("echo", "own echo") // the first would have come before it
	expectNothing(t, c, "no local")
	o, _ := rawConnect(t, n, connect5("o", true, 0))
	publishAcked(t, o, 1, pub("nl/a", 1, 0, "other"))
	m := c.ExpectPublish("nl/a", "other")
	c.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
}

// TestTopicAliasClientToBroker: a client sets an alias with a topic, then
// publishes with the alias alone; out-of-range and unknown aliases end the
// connection.
func TestTopicAliasClientToBroker(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.TopicAliasMaximum = 4
	n := brokertest.Start(t, cfg)
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.Subscribe(1, sub("al/#", 0))
	p, ack := rawConnect(t, n, connect5("p", true, 0))
	if ack.Props.TopicAliasMaximum != 4 {
		t.Fatalf("CONNACK %s", packet.Describe(ack))
	}
	set := pub("al/x", 1, 0, "set")
	set.Props.SetTopicAlias(3)
	publishAcked(t, p, 1, set)
	use := pub("", 1, 0, "use")
	use.Props.SetTopicAlias(3)
	publishAcked(t, p, 2, use)
	re := pub("al/y", 0, 0, "remap")
	re.Props.SetTopicAlias(3)
	publishAcked(t, p, 3, re)
	use2 := pub("", 0, 0, "use again")
	use2.Props.SetTopicAlias(3)
	publishAcked(t, p, 4, use2)
	for _, w := range [][2]string{{"al/x", "set"}, {"al/x", "use"}, {"al/y", "remap"}, {"al/y", "use again"}} {
		if m := s.ExpectPublish(w[0], w[1]); m.Props.Has(packet.PropTopicAlias) {
			t.Fatalf("alias leaked to the subscriber: %s", packet.Describe(m))
		}
	}

	big := pub("al/z", 0, 0, "x")
	big.Props.SetTopicAlias(5)
	p.Send(big)
	p.ExpectDisconnect(packet.TopicAliasInvalid)

	p, _ = rawConnect(t, n, connect5("p", true, 0))
	unknown := pub("", 0, 0, "x")
	unknown.Props.SetTopicAlias(2)
	p.Send(unknown)
	p.ExpectDisconnect(packet.ProtocolError)

	// Aliases belong to a connection: a new one starts with none.
	p, _ = rawConnect(t, n, connect5("p2", true, 0))
	p.Send(use2)
	p.ExpectDisconnect(packet.ProtocolError)
}

// TestTopicAliasBrokerToClient: the broker assigns aliases within the
// client's Topic Alias Maximum: the second PUBLISH on a topic arrives with an
// empty topic and the alias.
func TestTopicAliasBrokerToClient(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	cp := connect5("s", true, 0)
	cp.Props.SetTopicAliasMaximum(2)
	s, _ := rawConnect(t, n, cp)
	s.Subscribe(1, sub("ta/#", 1))
	none, _ := rawConnect(t, n, connect5("none", true, 0)) // Topic Alias Maximum 0
	none.Subscribe(1, sub("ta/#", 1))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	seq := []string{"ta/x", "ta/x", "ta/y", "ta/z", "ta/y", "ta/z", "ta/x"}
	for i, tp := range seq {
		publishAcked(t, p, uint16(i+1), pub(tp, 0, 0, tp))
	}
	aliases := map[uint16]string{}
	byTopic := map[string]uint16{}
	for i, m := range drain(t, s) {
		want := seq[i]
		if string(m.Payload) != want {
			t.Fatalf("message %d: %s", i, packet.Describe(m))
		}
		has := m.Props.Has(packet.PropTopicAlias)
		a := m.Props.TopicAlias
		switch {
		case has && (a == 0 || a > 2):
			t.Fatalf("alias %d outside the client's maximum 2", a)
		case has && m.Topic != "":
			aliases[a] = m.Topic // alias set
			byTopic[m.Topic] = a
		case has:
			if aliases[a] != want {
				t.Fatalf("alias %d stands for %q, message is on %q", a, aliases[a], want)
			}
		case m.Topic != want:
			t.Fatalf("message %d: topic %q", i, m.Topic)
		}
		if i == 1 && (!has || m.Topic != "") {
			t.Fatalf("second PUBLISH on ta/x did not use the alias: %s", packet.Describe(m))
		}
	}
	if len(aliases) != 2 {
		t.Fatalf("aliases assigned: %v", aliases)
	}
	for _, m := range drain(t, none) {
		if m.Props.Has(packet.PropTopicAlias) || m.Topic == "" {
			t.Fatalf("alias sent to a client with Topic Alias Maximum 0: %s", packet.Describe(m))
		}
	}
}

// TestMessageExpiry: the expiry interval is decremented by the time a message
// waited in the broker, and an expired message is never delivered (counted as
// dropped, reason expired).
func TestMessageExpiry(t *testing.T) {
	clk := manualClock()
	n := brokertest.StartClock(t, brokertest.Config(t), clk)
	cp := connect5("s", true, 300)
	s, _ := rawConnect(t, n, cp)
	s.Subscribe(1, sub("ex/#", 1))
	s.Send(&packet.Disconnect{})
	s.Closed()
	n.WaitSessions(0, 1)

	p, _ := rawConnect(t, n, connect5("p", true, 0))
	long := pub("ex/long", 1, 0, "long")
	long.Props.SetMessageExpiry(10)
	publishAcked(t, p, 1, long)
	short := pub("ex/short", 1, 0, "short")
	short.Props.SetMessageExpiry(3)
	publishAcked(t, p, 2, short)
	none := pub("ex/none", 1, 0, "none")
	publishAcked(t, p, 3, none)
	ret := retained("ex/ret", 1, "retained")
	ret.Props.SetMessageExpiry(3)
	publishAcked(t, p, 4, ret)

	clk.Advance(4 * time.Second)
	s, _ = rawConnect(t, n, connect5("s", false, 300))
	m := s.ExpectPublish("ex/long", "long")
	if !m.Props.Has(packet.PropMessageExpiry) || m.Props.MessageExpiry != 6 {
		t.Fatalf("expiry after 4 s of 10: %s", packet.Describe(m))
	}
	m2 := s.ExpectPublish("ex/none", "none")
	if m2.Props.Has(packet.PropMessageExpiry) {
		t.Fatalf("expiry added: %s", packet.Describe(m2))
	}
	s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m2.PacketID})
	expectNothing(t, s, "expired message delivered")
	if got := n.Dropped(metrics.DropExpired); got != 2 { // ex/short and ex/ret were queued for s
		t.Fatalf("dropped{expired} = %v, want 2", got)
	}
	// The expired retained message is not sent to new subscribers.
	s2, _ := rawConnect(t, n, connect5("s2", true, 0))
	s2.Subscribe(1, sub("ex/#", 1))
	expectNothing(t, s2, "expired retained message delivered")

	// A retained message's interval counts down too.
	rl := retained("rx/rl", 1, "retained long")
	rl.Props.SetMessageExpiry(100)
	publishAcked(t, p, 6, rl)
	clk.Advance(40 * time.Second)
	s3, _ := rawConnect(t, n, connect5("s3", true, 0))
	s3.Subscribe(1, sub("rx/rl", 1))
	if m := s3.ExpectPublish("rx/rl", "retained long"); m.Props.MessageExpiry != 60 {
		t.Fatalf("retained after 40 s of 100: %s", packet.Describe(m))
	}

	// A live delivery carries the interval as published.
	live := pub("ex/live", 1, 0, "live")
	live.Props.SetMessageExpiry(100)
	publishAcked(t, p, 5, live)
	if m := s2.ExpectPublish("ex/live", "live"); m.Props.MessageExpiry != 100 {
		t.Fatalf("live: %s", packet.Describe(m))
	}
}

// TestPublishPropertiesPassThrough: user properties (order and duplicates
// kept), content type, payload format indicator, response topic and
// correlation data reach v5 subscribers unchanged, raw and paho; a 3.1.1
// subscriber gets the message without them.
func TestPublishPropertiesPassThrough(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.Subscribe(1, sub("pp", 1))
	v := n.ConnectV5(&paho.Connect{ClientID: "paho", CleanStart: true, KeepAlive: 30})
	v.Sub("pp", 1)
	s3, _ := rawConnect(t, n, connect3("s3", true))
	s3.Subscribe(1, sub("pp", 1))

	p := n.ConnectV5(&paho.Connect{ClientID: "p", CleanStart: true, KeepAlive: 30})
	ctx, cancel := ctx5()
	defer cancel()
	format := byte(1)
	if _, err := p.Publish(ctx, &paho.Publish{Topic: "pp", QoS: 1, Payload: []byte("héllo"), Properties: &paho.PublishProperties{
		ContentType: "text/plain", PayloadFormat: &format, ResponseTopic: "pp/reply", CorrelationData: []byte("corr-1"),
		User: paho.UserProperties{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {Key: "a", Value: "3"}},
	}}); err != nil {
		t.Fatal(err)
	}
	m := s.ExpectPublish("pp", "héllo")
	pr := &m.Props
	wantUser := []packet.UserProperty{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {Key: "a", Value: "3"}}
	if pr.ContentType != "text/plain" || !pr.Has(packet.PropPayloadFormat) || pr.PayloadFormat != 1 ||
		pr.ResponseTopic != "pp/reply" || string(pr.CorrelationData) != "corr-1" || !slices.Equal(pr.User, wantUser) {
		t.Fatalf("raw: %s", packet.Describe(m))
	}
	pm := v.Next()
	pp := pm.Properties
	if pp.ContentType != "text/plain" || pp.PayloadFormat == nil || *pp.PayloadFormat != 1 || pp.ResponseTopic != "pp/reply" ||
		!bytes.Equal(pp.CorrelationData, []byte("corr-1")) || len(pp.User) != 3 || pp.User[2].Value != "3" {
		t.Fatalf("paho: %+v", pp)
	}
	m3 := s3.ExpectPublish("pp", "héllo")
	if m3.Props.Present != 0 || len(m3.Props.User) != 0 {
		t.Fatalf("3.1.1 got properties: %s", packet.Describe(m3))
	}
}

// TestPayloadFormatInvalid: payload format indicator 1 with a payload that is
// not UTF-8 is refused: PUBACK 0x99 at QoS 1, DISCONNECT 0x99 at QoS 0.
func TestPayloadFormatInvalid(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.Subscribe(1, sub("pf", 1))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	bad := &packet.Publish{Topic: "pf", QoS: 1, PacketID: 1, Payload: []byte{0xff, 0xfe}}
	bad.Props.SetPayloadFormat(1)
	p.Send(bad)
	if a := p.ExpectAck(packet.PUBACK, 1); a.ReasonCode != packet.PayloadFormatInvalid {
		t.Fatalf("PUBACK %s", packet.Describe(a))
	}
	// The same bytes without the indicator are fine.
	ok := &packet.Publish{Topic: "pf", QoS: 1, PacketID: 2, Payload: []byte{0xff, 0xfe}}
	publishAcked(t, p, 2, ok)
	if got := drain(t, s); len(got) != 1 || !bytes.Equal(got[0].Payload, []byte{0xff, 0xfe}) {
		t.Fatalf("subscriber got %v", got)
	}
	bad.QoS, bad.PacketID = 0, 0
	p.Send(bad)
	p.ExpectDisconnect(packet.PayloadFormatInvalid)
}

// TestMaximumPacketSize: a packet larger than the broker's maximum ends the
// connection (v5: DISCONNECT 0x95); a message larger than a client's Maximum
// Packet Size is not sent to it and is counted as dropped (too_large).
func TestMaximumPacketSize(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxPacketSize = 1024
	n := brokertest.Start(t, cfg)

	p, ack := rawConnect(t, n, connect5("p", true, 0))
	if !ack.Props.Has(packet.PropMaximumPacketSize) || ack.Props.MaximumPacketSize != 1024 {
		t.Fatalf("CONNACK %s", packet.Describe(ack))
	}
	p.Send(pub("big", 0, 0, string(make([]byte, 2000))))
	p.ExpectDisconnect(packet.PacketTooLarge)
	p3, _ := rawConnect(t, n, connect3("p3", true))
	p3.Send(pub("big", 0, 0, string(make([]byte, 2000))))
	p3.ExpectClosedSilently()

	cp := connect5("small", true, 0)
	cp.Props.SetMaximumPacketSize(100)
	small, _ := rawConnect(t, n, cp)
	small.Subscribe(1, sub("mps/#", 1))
	large, _ := rawConnect(t, n, connect5("large", true, 0))
	large.Subscribe(1, sub("mps/#", 1))
	p, _ = rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, pub("mps/a", 1, 0, string(bytes.Repeat([]byte("x"), 200))))
	publishAcked(t, p, 2, pub("mps/a", 0, 0, string(bytes.Repeat([]byte("y"), 200))))
	publishAcked(t, p, 3, pub("mps/a", 1, 0, "fits"))
	got := drain(t, small)
	if len(got) != 1 || string(got[0].Payload) != "fits" {
		t.Fatalf("client with maximum 100 got %d messages (%v)", len(got), got)
	}
	if l := len(drain(t, large)); l != 3 {
		t.Fatalf("client without a maximum got %d of 3", l)
	}
	if d := n.Dropped(metrics.DropTooLarge); d != 2 {
		t.Fatalf("dropped{too_large} = %v, want 2", d)
	}
	// The refused QoS 1 message did not stay in flight.
	small.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: got[0].PacketID})
	for i := 0; i < 3; i++ {
		publishAcked(t, p, uint16(10+i), pub("mps/a", 1, 0, "more"))
	}
	if got := drain(t, small); len(got) != 3 {
		t.Fatalf("after a too-large message: %d of 3 delivered", len(got))
	}
}

// TestRequestProblemInformation0: a client that asks for no problem
// information gets no Reason String or User Properties on packets other than
// PUBLISH, CONNACK and DISCONNECT, even on failures.
func TestRequestProblemInformation0(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxSubscriptions = 1
	n := brokertest.Start(t, cfg)
	cp := connect5("c", true, 0)
	cp.Props.SetRequestProblemInfo(0)
	c, _ := rawConnect(t, n, cp)
	var got []packet.Packet
	sa := c.Subscribe(1, sub("a", 1), sub("b", 1), sub("a/#/b", 1))
	if sa.Codes[1] != packet.QuotaExceeded || sa.Codes[2] != packet.TopicFilterInvalid {
		t.Fatalf("SUBACK %s", packet.Describe(sa))
	}
	got = append(got, sa)
	c.Send(&packet.Unsubscribe{PacketID: 2, Filters: []string{"nope"}})
	got = append(got, brokertest.Expect[*packet.Unsuback](c))
	bad := &packet.Publish{Topic: "a", QoS: 1, PacketID: 3, Payload: []byte{0xff}}
	bad.Props.SetPayloadFormat(1)
	c.Send(bad)
	got = append(got, c.ExpectAck(packet.PUBACK, 3))
	c.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: 4})
	got = append(got, c.ExpectAck(packet.PUBCOMP, 4))
	c.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: 5})
	got = append(got, c.ExpectAck(packet.PUBREL, 5))
	for _, g := range got {
		var pr *packet.Properties
		switch g := g.(type) {
		case *packet.Suback:
			pr = &g.Props
		case *packet.Unsuback:
			pr = &g.Props
		case *packet.Ack:
			pr = &g.Props
			if g.ReasonCode == packet.Success {
				t.Fatalf("expected a failure code: %s", packet.Describe(g))
			}
		}
		if pr.Has(packet.PropReasonString) || len(pr.User) > 0 {
			t.Errorf("problem information sent with request problem information 0: %s", packet.Describe(g))
		}
	}
}

// TestRequestResponseInformation: asking for it gets Response Information in
// CONNACK; not asking gets none.
func TestRequestResponseInformation(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	cp := connect5("c", true, 0)
	cp.Props.SetRequestResponseInfo(1)
	_, ack := rawConnect(t, n, cp)
	if !ack.Props.Has(packet.PropResponseInfo) || ack.Props.ResponseInfo == "" {
		t.Fatalf("CONNACK %s", packet.Describe(ack))
	}
	_, ack = rawConnect(t, n, connect5("d", true, 0))
	if ack.Props.Has(packet.PropResponseInfo) {
		t.Fatalf("unrequested: %s", packet.Describe(ack))
	}
	// A client may subscribe and publish under it.
	v := n.ConnectV5(&paho.Connect{ClientID: "e", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{RequestResponseInfo: true}})
	ri := v.Connack.Properties.ResponseInfo
	if ri == "" {
		t.Fatal("paho: no response information")
	}
	v.Sub(ri+"#", 0)
	v.Pub(ri+"x", 0, false, "reply")
	if m := v.Next(); m.Topic != ri+"x" {
		t.Fatalf("got %s", brokertest.String(m))
	}
}

// TestGracefulShutdownSends8B: stopping the node sends DISCONNECT 0x8B to v5
// clients and closes 3.1.1 connections.
func TestGracefulShutdownSends8B(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	r5, _ := rawConnect(t, n, connect5("r5", true, 0))
	r3, _ := rawConnect(t, n, connect3("r3", true))
	v := n.ConnectV5(&paho.Connect{ClientID: "paho", CleanStart: true, KeepAlive: 30})
	done := make(chan struct{})
	go func() { n.Stop(); close(done) }()
	r5.ExpectDisconnect(packet.ServerShuttingDown)
	r3.ExpectClosedSilently()
	select {
	case d := <-v.Disconnects:
		if d.ReasonCode != byte(packet.ServerShuttingDown) {
			t.Fatalf("paho got 0x%02x", d.ReasonCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("paho got no DISCONNECT")
	}
	<-done
}

// TestNoMatchingSubscribers: a v5 QoS 1/2 publish nobody subscribes to is
// acknowledged with 0x10; a 3.1.1 one with a plain acknowledgement.
func TestNoMatchingSubscribers(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	if a := publishAcked(t, p, 1, pub("nobody", 1, 0, "x")); a.ReasonCode != packet.NoMatchingSubscribers {
		t.Fatalf("PUBACK %s", packet.Describe(a))
	}
	if a := publishAcked(t, p, 2, pub("nobody", 2, 0, "x")); a.ReasonCode != packet.NoMatchingSubscribers {
		t.Fatalf("PUBREC %s", packet.Describe(a))
	}
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.Subscribe(1, sub("$share/g/somebody", 1))
	if a := publishAcked(t, p, 3, pub("somebody", 1, 0, "x")); a.ReasonCode != packet.Success {
		t.Fatalf("PUBACK with a shared subscriber %s", packet.Describe(a))
	}
	p3, _ := rawConnect(t, n, connect3("p3", true))
	if a := publishAcked(t, p3, 1, pub("nobody", 1, 0, "x")); a.ReasonCode != packet.Success {
		t.Fatalf("3.1.1 PUBACK %s", packet.Describe(a))
	}
}
