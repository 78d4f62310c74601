package broker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestStateSurvivesRestart: persistent sessions with their subscriptions
// (options and identifiers), queued QoS 1/2 messages of offline sessions,
// messages in flight (same packet id, DUP), QoS 2 flows in both directions
// and retained messages survive a restart of the node; non-persistent
// sessions do not.
func TestStateSurvivesRestart(t *testing.T) {
	clk := manualClock()
	n := brokertest.StartClock(t, brokertest.Config(t), clk)

	// s: offline, with subscriptions, messages queued while away.
	s, _ := rawConnect(t, n, connect5("s", true, 3600))
	s.SubscribeProps(1, subID(5), sub("d/#", 2))
	s.Subscribe(2, packet.Subscription{Filter: "nl", QoS: 1, NoLocal: true})
	s.Send(&packet.Disconnect{})
	s.Closed()
	// f: received messages and acknowledged none of them (QoS 2: PUBREC sent).
	f, _ := rawConnect(t, n, connect5("f", true, 3600))
	f.Subscribe(1, sub("f/#", 2))
	// tmp: a non-persistent session.
	tmp, _ := rawConnect(t, n, connect5("tmp", true, 0))
	tmp.Subscribe(1, sub("d/#", 1))

	p, _ := rawConnect(t, n, connect5("p", true, 3600))
	var sent []string
	for i := 0; i < 6; i++ {
		m := pub(fmt.Sprintf("d/%d", i), byte(1+i%2), 0, fmt.Sprint("q", i))
		publishAcked(t, p, uint16(i+1), m)
		sent = append(sent, string(m.Payload))
	}
	publishAcked(t, p, 10, pub("d/zero", 0, 0, "qos0 not kept")) // QoS 0 is not queued offline
	publishAcked(t, p, 11, retained("r/1", 1, "retained one"))
	publishAcked(t, p, 12, retained("r/0", 0, "retained zero"))
	publishAcked(t, p, 13, pub("f/1", 1, 0, "f1"))
	publishAcked(t, p, 14, pub("f/2", 2, 0, "f2"))
	publishAcked(t, p, 15, pub("f/3", 2, 0, "f3"))
	f1 := f.ExpectPublish("f/1", "f1")
	f2 := f.ExpectPublish("f/2", "f2")
	f3 := f.ExpectPublish("f/3", "f3")
	f.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: f3.PacketID})
	f.ExpectAck(packet.PUBREL, f3.PacketID)
	// p: an inbound QoS 2 message whose PUBREL has not come yet.
	p.Send(pub("d/in", 2, 77, "inbound"))
	p.ExpectAck(packet.PUBREC, 77)
	f.Close()
	p.Close()
	tmp.Close()
	n.WaitSessions(0, 3)

	n = n.Restart()

	if st := n.Broker().Stats(); st.Sessions != 3 || st.Retained != 2 {
		t.Fatalf("after restart: %+v", st)
	}
	// p finishes its QoS 2 flow; a resend before PUBREL is not routed again.
	p, ack := rawConnect(t, n, connect5("p", false, 3600))
	if !ack.SessionPresent {
		t.Fatal("p: session lost")
	}
	dup := pub("d/in", 2, 77, "inbound")
	dup.Dup = true
	p.Send(dup)
	p.ExpectAck(packet.PUBREC, 77)
	p.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: 77})
	if a := p.ExpectAck(packet.PUBCOMP, 77); a.ReasonCode != packet.Success {
		t.Fatalf("PUBCOMP after restart: %s", packet.Describe(a))
	}

	sc := connect5("s", false, 3600)
	sc.Props.SetReceiveMaximum(1) // one at a time: the acknowledgement flows stay in lockstep
	s, ack = rawConnect(t, n, sc)
	if !ack.SessionPresent {
		t.Fatal("s: session lost")
	}
	var got []string
	for len(got) < len(sent)+1 {
		m := brokertest.Expect[*packet.Publish](s)
		got = append(got, string(m.Payload))
		if !slices.Equal(m.Props.SubscriptionIDs, []uint32{5}) {
			t.Fatalf("subscription id lost: %s", packet.Describe(m))
		}
		if want := byte(1 + (len(got)-1)%2); len(got) <= len(sent) && m.QoS != want {
			t.Fatalf("%s: QoS %d, want %d", m.Payload, m.QoS, want)
		}
		switch m.QoS {
		case 1:
			s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
		case 2:
			s.Send(&packet.Ack{Kind: packet.PUBREC, PacketID: m.PacketID})
			s.ExpectAck(packet.PUBREL, m.PacketID)
			s.Send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: m.PacketID})
		}
	}
	if want := append(slices.Clone(sent), "inbound"); !slices.Equal(got, want) {
		t.Fatalf("s got %q, want %q", got, want)
	}
	expectNothing(t, s, "s after its queue")
	// Its subscriptions, options included, are live.
	publishAcked(t, s, 1, pub("nl", 1, 0, "own")) // no local
	publishAcked(t, p, 2, pub("d/live", 1, 0, "live"))
	m := s.ExpectPublish("d/live", "live")
	s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	expectNothing(t, s, "no local after restart")

	// f gets its unacknowledged messages again, same ids, DUP set, and the
	// PUBREL of the flow that was past PUBREC.
	f, _ = rawConnect(t, n, connect5("f", false, 3600))
	r1 := f.ExpectPublish("f/1", "f1")
	r2 := f.ExpectPublish("f/2", "f2")
	f.ExpectAck(packet.PUBREL, f3.PacketID)
	if !r1.Dup || !r2.Dup || r1.PacketID != f1.PacketID || r2.PacketID != f2.PacketID {
		t.Fatalf("redelivery after restart: %s, %s (first ids %d, %d)", packet.Describe(r1), packet.Describe(r2), f1.PacketID, f2.PacketID)
	}

	// tmp is gone; retained messages are there.
	tmp, ack = rawConnect(t, n, connect5("tmp", false, 0))
	if ack.SessionPresent {
		t.Fatal("non-persistent session survived the restart")
	}
	tmp.Subscribe(1, sub("r/+", 1))
	rs := drain(t, tmp)
	if len(rs) != 2 {
		t.Fatalf("%d retained messages after restart", len(rs))
	}
	for _, r := range rs {
		if !r.Retain || (r.Topic == "r/1") != (r.QoS == 1) {
			t.Fatalf("retained after restart: %s", packet.Describe(r))
		}
	}
}

// TestExpiryAndWillsAcrossRestart: a session whose expiry passes while the
// node is down is gone at start and its will published; a delayed will
// pending at shutdown fires after the rest of its delay.
func TestExpiryAndWillsAcrossRestart(t *testing.T) {
	clk := manualClock()
	n := brokertest.StartClock(t, brokertest.Config(t), clk)
	w, _ := rawConnect(t, n, connect5("w", true, 3600))
	w.Subscribe(1, sub("will/#", 1))
	w.Send(&packet.Disconnect{})
	w.Closed()

	short, _ := rawConnect(t, n, withWill(connect5("short", true, 10), "will/short", "expired", 1, false, 100))
	short.Close()
	delayed, _ := rawConnect(t, n, withWill(connect5("delayed", true, 3600), "will/delayed", "delayed", 1, false, 30))
	delayed.Close()
	n.WaitSessions(0, 3)

	clk.Advance(5 * time.Second)
	n = n.Restart()
	clk.Advance(6 * time.Second) // short's expiry (10 s) has passed
	if st := n.Broker().Stats(); st.Sessions != 2 {
		t.Fatalf("sessions after short expired: %d", st.Sessions)
	}
	n = n.Restart()
	clk.Advance(18 * time.Second) // 29 s of delayed's 30
	w, _ = rawConnect(t, n, connect5("w", false, 3600))
	m := w.ExpectPublish("will/short", "expired")
	w.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	expectNothing(t, w, "delayed will early")
	clk.Advance(time.Second)
	m = w.ExpectPublish("will/delayed", "delayed")
	w.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})

	// Session expiry across a restart while the node is down.
	w.Send(&packet.Disconnect{})
	w.Closed()
	n.WaitSessions(0, 2)
	n.Stop()
	clk.Advance(2 * time.Hour)
	n = brokertest.StartClock(t, n.Cfg, clk)
	if st := n.Broker().Stats(); st.Sessions != 0 {
		t.Fatalf("%d sessions survived their expiry during downtime", st.Sessions)
	}
}

// TestSpilledQueueSurvivesRestart: an offline persistent session's messages
// beyond the in-memory queue (spilled to disk) survive a restart and arrive
// in order; past max-stored-messages new messages are dropped and counted;
// an unsubscribe is durable too.
func TestSpilledQueueSurvivesRestart(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 3
	cfg.MaxStoredMessages = 10
	n := brokertest.Start(t, cfg)
	s, _ := rawConnect(t, n, connect5("s", true, 3600))
	s.Subscribe(1, sub("sp", 1), sub("gone", 1))
	s.Send(&packet.Unsubscribe{PacketID: 2, Filters: []string{"gone"}})
	brokertest.Expect[*packet.Unsuback](s)
	s.Send(&packet.Disconnect{})
	s.Closed()
	n.WaitSessions(0, 1)

	p, _ := rawConnect(t, n, connect5("p", true, 0))
	const total = 20 // 3 in memory, 10 on disk beyond them, 7 dropped
	for i := 1; i <= total; i++ {
		publishAcked(t, p, uint16(i), pub("sp", 1, 0, fmt.Sprint(i)))
	}
	publishAcked(t, p, 100, pub("gone", 1, 0, "unsubscribed"))
	if d := n.Dropped(metrics.DropSessionQuota); d != 7 {
		t.Fatalf("dropped{session_quota} = %v, want 7", d)
	}
	p.Close()
	n = n.Restart()
	s, _ = rawConnect(t, n, connect5("s", false, 3600))
	for i := 1; i <= 13; i++ {
		m := s.ExpectPublish("sp", fmt.Sprint(i))
		s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}
	expectNothing(t, s, "beyond the stored quota, or unsubscribed")
}

// TestSpilledQueueAcrossReconnects: a persistent subscriber that reads part
// of a spilled backlog, drops its connection with a message unacknowledged
// and comes back gets the rest, in order, the unacknowledged one first with
// DUP set, and nothing twice.
func TestSpilledQueueAcrossReconnects(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxQueuedMessages = 3
	n := brokertest.Start(t, cfg)
	cp := connect5("s", true, 3600)
	cp.Props.SetReceiveMaximum(1)
	s, _ := rawConnect(t, n, cp)
	s.Subscribe(1, sub("bk", 1))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	const total = 30
	for i := 1; i <= total; i++ {
		publishAcked(t, p, uint16(i), pub("bk", 1, 0, fmt.Sprint(i)))
	}
	next := 1
	for round := 0; next <= total; round++ {
		if round > 0 {
			cp.CleanStart = false
			s, _ = rawConnect(t, n, cp)
		}
		for k := 0; k < 7 && next <= total; k++ {
			m := s.ExpectPublish("bk", fmt.Sprint(next))
			if k == 0 && round > 0 && !m.Dup {
				t.Fatalf("round %d: unacknowledged message resent without DUP", round)
			}
			if k < 6 {
				s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
				next++
			}
		}
		if next > total {
			break
		}
		s.Close() // the last one received is unacknowledged
		n.WaitSessions(1, 1)
		if round%2 == 1 {
			n = n.Restart()
			p, _ = rawConnect(t, n, connect5("p", true, 0))
		}
	}
	expectNothing(t, s, "duplicate")
}

// TestEndedSessionsStayEndedAfterRestart: a persistent session discarded by
// clean start, or ended by DISCONNECT with session expiry 0, leaves nothing
// on disk: after a restart it is not present and its old messages never
// arrive.
func TestEndedSessionsStayEndedAfterRestart(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	for _, id := range []string{"clean", "zero"} {
		s, _ := rawConnect(t, n, connect5(id, true, 3600))
		s.Subscribe(1, sub("e/"+id, 1))
		s.Send(&packet.Disconnect{})
		s.Closed()
	}
	n.WaitSessions(0, 2)
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	publishAcked(t, p, 1, pub("e/clean", 1, 0, "old"))
	publishAcked(t, p, 2, pub("e/zero", 1, 0, "old"))
	p.Close()

	c, _ := rawConnect(t, n, connect5("clean", true, 0)) // discards the session
	c.Send(&packet.Disconnect{})
	c.Closed()
	z, _ := rawConnect(t, n, connect5("zero", false, 3600))
	z.ExpectPublish("e/zero", "old") // not acknowledged: it would be resent
	d := &packet.Disconnect{}
	d.Props.SetSessionExpiry(0)
	z.Send(d)
	z.Closed()
	n.WaitSessions(0, 0)

	n = n.Restart()
	if st := n.Broker().Stats(); st.Sessions != 0 || st.Subscriptions != 0 {
		t.Fatalf("after restart: %+v", st)
	}
	for _, id := range []string{"clean", "zero"} {
		s, ack := rawConnect(t, n, connect5(id, false, 3600))
		if ack.SessionPresent {
			t.Fatalf("%s: session present", id)
		}
		expectNothing(t, s, id+": old message")
	}
}
