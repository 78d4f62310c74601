package session

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/store"
)

// heldStore is a Persister whose commits become durable only when the test
// says (release): the store's group commit, stretched.
type heldStore struct {
	mu      sync.Mutex
	pending []func(error)
	batches []*store.Batch
	queued  chan struct{} // a token per commit
	// durable, if set, receives each batch when it is released, before
	// its committer hears that it is durable: what a crash would keep.
	durable *store.Store
}

func newHeldStore() *heldStore { return &heldStore{queued: make(chan struct{}, 1024)} }

func (h *heldStore) Commit(_ context.Context, b *store.Batch, done func(error)) error {
	if done == nil {
		done = func(error) {}
	}
	h.mu.Lock()
	h.pending = append(h.pending, done)
	h.batches = append(h.batches, b)
	h.mu.Unlock()
	h.queued <- struct{}{}
	return nil
}

func (h *heldStore) LoadMessagesFrom(string, uint64, int, func(*store.QueuedMessage) error) error {
	return nil
}

// release makes every commit so far durable, in order.
func (h *heldStore) release() {
	h.mu.Lock()
	done, batches := h.pending, h.batches[len(h.batches)-len(h.pending):]
	h.pending = nil
	h.mu.Unlock()
	for i, d := range done {
		if h.durable != nil {
			if err := h.durable.CommitWait(context.Background(), batches[i]); err != nil {
				panic(err)
			}
		}
		d(nil)
	}
}

// last returns the latest batch committed.
func (h *heldStore) last() *store.Batch {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.batches[len(h.batches)-1]
}

// waitCommit waits for the next commit to reach the store.
func (h *heldStore) waitCommit(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.queued:
	case <-time.After(10 * time.Second):
		t.Fatalf("no commit reached the store: %s", what)
	}
}

// expectNothing checks that nothing reaches cl while the store holds its
// commits. A bound, not a sleep in the logic: the writer has committed
// what it waits on (waitCommit), so a PUBLISH not held would be on the
// socket at once.
func (cl *client) expectNothing(what string) {
	cl.t.Helper()
	_ = cl.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	p, err := cl.r.Next()
	if err == nil {
		cl.t.Fatalf("%s: got %s before the store made it durable", what, packet.Describe(p))
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() && !errors.Is(err, os.ErrDeadlineExceeded) {
		cl.t.Fatalf("%s: read: %v", what, err)
	}
	// The reader is left mid-nothing: a timeout before any byte.
}

// TestHeldDeliveryWaitsForTheStore: a sequenced topic's record delivered
// QoS 2 to a persistent session does not reach the socket before the
// store has made durable both the delivery's batch (stored copy and
// cursor) and its sent state (the packet id), and the PUBREL answering
// its PUBREC not before ReleaseSent is durable. Sent earlier, a crash of
// the node within the group commit would send it again as a new message
// (from the log, or from the stored queue under a new packet id), which
// a QoS 2 receiver hands to its application a second time. A direct
// topic's delivery to the same session is not held.
func TestHeldDeliveryWaitsForTheStore(t *testing.T) {
	n := startTestNode(t, testLimits())
	n.hub.expiry = 3600
	st := newHeldStore()
	n.env.Store = st
	sub := n.connect("sub", nil)
	sub.subscribe("g/a", 2)
	s := n.hub.session("sub")
	// Drain the commits of the handshake, if any.
	st.release()
	for len(st.queued) > 0 {
		<-st.queued
	}

	m := &message.Message{Topic: "g/a", Payload: []byte("r1"), QoS: 2}
	var p Persist
	if out, _ := s.Deliver(Delivery{Msg: m, QoS: 2, Group: "grp", Seq: 1}, &p); out != Queued {
		t.Fatalf("Deliver: %v", out)
	}
	if p.Len() == 0 {
		t.Fatal("the delivery put nothing in its batch")
	}
	if err := st.Commit(context.Background(), p.Batch, nil); err != nil {
		t.Fatal(err)
	}
	p.Ticket.Committed()
	st.waitCommit(t, "the delivery's batch")
	st.waitCommit(t, "the barrier or the sent state")
	sub.expectNothing("the record before its batch and state are durable")

	st.release()
	pub, ok := sub.next().(*packet.Publish)
	if !ok || string(pub.Payload) != "r1" {
		t.Fatalf("after the store: got %v", pub)
	}
	sub.send(&packet.Ack{Kind: packet.PUBREC, PacketID: pub.PacketID})
	st.waitCommit(t, "ReleaseSent")
	sub.expectNothing("the PUBREL before ReleaseSent is durable")
	st.release()
	if a, ok := sub.next().(*packet.Ack); !ok || a.Kind != packet.PUBREL || a.PacketID != pub.PacketID {
		t.Fatalf("after the store: got %v, want PUBREL %d", a, pub.PacketID)
	}
	sub.send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: pub.PacketID})

	// A direct topic's QoS 2 delivery goes while its writes are pending.
	var pd Persist
	if out, _ := s.Deliver(Delivery{Msg: &message.Message{Topic: "g/a", Payload: []byte("d1"), QoS: 2}, QoS: 2}, &pd); out != Queued {
		t.Fatalf("Deliver: %v", out)
	}
	if got, ok := sub.next().(*packet.Publish); !ok || string(got.Payload) != "d1" {
		t.Fatalf("direct: got %v", got)
	}
	pd.Ticket.Committed()
	st.release()
}

// TestHeldDeliveryIDDurableBeforeSend: the packet id of a held delivery
// (a sequenced topic's record, QoS 1 and 2, to a persistent session) is
// in the store, as sent, when the PUBLISH reaches the client, and it went
// with the delivery's own batch (its stored copy and cursor): what is
// committed after it is an empty barrier, so a record costs one store
// commit before the socket. Sent earlier, a crash would send the record
// again under a new id, a new message to the client.
func TestHeldDeliveryIDDurableBeforeSend(t *testing.T) {
	for _, qos := range []byte{1, 2} {
		n := startTestNode(t, testLimits())
		n.hub.expiry = 3600
		db, err := store.Open(t.TempDir()+"/s.db", store.Options{Fsync: store.FsyncNever})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		st := newHeldStore()
		st.durable = db
		n.env.Store = st
		sub := n.connect("sub", nil)
		sub.subscribe("g/a", qos)
		s := n.hub.session("sub")
		st.release()
		for len(st.queued) > 0 {
			<-st.queued
		}

		for i, payload := range []string{"r1", "r2"} {
			var p Persist
			m := &message.Message{Topic: "g/a", Payload: []byte(payload), QoS: qos}
			if out, _ := s.Deliver(Delivery{Msg: m, QoS: qos, Group: "grp", Seq: uint64(i + 1)}, &p); out != Queued {
				t.Fatalf("QoS %d: Deliver: %v", qos, out)
			}
			// Its batch not even queued on the store: nothing goes,
			// whatever else the store makes durable.
			sub.expectNothing("the record before its batch is queued")
			st.release()
			sub.expectNothing("the record before its batch is queued")
			if err := st.Commit(context.Background(), p.Batch, nil); err != nil {
				t.Fatal(err)
			}
			p.Ticket.Committed()
			st.waitCommit(t, "the delivery's batch")
			st.waitCommit(t, "the barrier behind it")
			if b := st.last(); b.Len() != 0 {
				t.Fatalf("QoS %d: %d operations committed after the delivery's batch: its packet id was not in it", qos, b.Len())
			}
			sub.expectNothing("the record before its batch is durable")
			st.release()
			pub, ok := sub.next().(*packet.Publish)
			if !ok || string(pub.Payload) != payload || pub.QoS != qos {
				t.Fatalf("QoS %d: after the store: got %v", qos, pub)
			}
			var found *store.QueuedMessage
			if err := db.LoadMessagesFrom("sub", 0, 100, func(q *store.QueuedMessage) error {
				if string(q.Msg.Payload) == payload {
					found = q
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if found == nil || found.State != store.SentAwaitingAck || found.PacketID != pub.PacketID {
				t.Fatalf("QoS %d: PUBLISH %q sent under id %d, the store holds %+v", qos, payload, pub.PacketID, found)
			}
		}
	}
}
