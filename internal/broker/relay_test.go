package broker_test

import (
	"sync"
	"testing"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// recordingRelay keeps what the broker relays.
type recordingRelay struct {
	mu  sync.Mutex
	got []string // "node client topic payload qos"
}

var _ broker.Relay = (*recordingRelay)(nil)

func (r *recordingRelay) Relay(node, clientID string, ds []broker.Relayed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range ds {
		r.got = append(r.got, node+" "+clientID+" "+d.Msg.Topic+" "+string(d.Msg.Payload)+" "+string('0'+d.QoS))
	}
}

func (r *recordingRelay) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// A session released to another node loses nothing that reached it after
// its export: the messages queued since the snapshot are relayed at
// release, and for RelayGrace its subscriptions keep catching messages and
// relaying them; then they go. The session itself is gone at once.
func TestReleasedSessionRelaysItsLastMessages(t *testing.T) {
	clk := manualClock()
	n := brokertest.StartClock(t, brokertest.Config(t), clk)
	rel := &recordingRelay{}
	n.Broker().SetRelay(rel)

	s, _ := rawConnect(t, n, connect5("mover", true, 600))
	s.Subscribe(1, sub("mv/#", 1))
	s.Send(&packet.Disconnect{})
	s.Closed()
	n.WaitSessions(0, 1)
	p, _ := rawConnect(t, n, connect5("pub", true, 0))
	publishAcked(t, p, 1, pub("mv/a", 1, 1, "before export"))

	st, err := n.Broker().ExportSession("mover")
	if err != nil || st == nil {
		t.Fatalf("export: %v %v", st, err)
	}
	if len(st.Messages) != 1 {
		t.Fatalf("snapshot holds %d messages, want 1", len(st.Messages))
	}
	st.MovedTo = "n2"
	publishAcked(t, p, 2, pub("mv/b", 1, 2, "after export"))
	n.Broker().ReleaseSession(st)
	if n.Broker().HoldsSession("mover") {
		t.Fatal("the released session is still held")
	}
	publishAcked(t, p, 3, pub("mv/c", 0, 0, "after release"))
	want := []string{"n2 mover mv/b after export 1", "n2 mover mv/c after release 0"}
	if got := rel.list(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("relayed %q, want %q (the snapshot's message is not relayed again)", got, want)
	}

	clk.Advance(broker.RelayGrace)
	publishAcked(t, p, 4, pub("mv/d", 1, 4, "after the grace"))
	if got := rel.list(); len(got) != 2 {
		t.Fatalf("relayed after the grace period: %q", got)
	}
	if subs := n.Broker().Stats().Subscriptions; subs != 0 {
		t.Fatalf("%d subscriptions left after the grace period", subs)
	}
}

// Without a relay (a node running alone) a release ends the session at
// once, as before.
func TestReleaseWithoutRelayEndsTheSession(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("mover", true, 600))
	s.Subscribe(1, sub("mv/#", 1))
	s.Send(&packet.Disconnect{})
	s.Closed()
	n.WaitSessions(0, 1)
	st, _ := n.Broker().ExportSession("mover")
	st.MovedTo = "n2"
	n.Broker().ReleaseSession(st)
	if subs := n.Broker().Stats().Subscriptions; subs != 0 || n.Broker().HoldsSession("mover") {
		t.Fatalf("released session left %d subscriptions", subs)
	}
}

// The new node delivers relayed messages to the session, if it holds it;
// otherwise they are dropped and counted.
func TestDeliverRelayed(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("arrived", true, 600))
	s.Subscribe(1, sub("mv/#", 1))
	m := &message.Message{Topic: "mv/x", Payload: []byte("relayed"), QoS: 1}
	if got := n.Broker().DeliverRelayed("arrived", []broker.Relayed{{Msg: m, QoS: 1}}); got != 1 {
		t.Fatalf("took %d", got)
	}
	if p := s.ExpectPublish("mv/x", "relayed"); p.QoS != 1 {
		t.Fatalf("QoS %d", p.QoS)
	}
	if got := n.Broker().DeliverRelayed("elsewhere", []broker.Relayed{{Msg: m, QoS: 1}}); got != 0 {
		t.Fatalf("a session not held here took %d", got)
	}
	if v := n.Dropped(metrics.DropMovedAway); v != 1 {
		t.Fatalf("moved_away drops %v", v)
	}
}
