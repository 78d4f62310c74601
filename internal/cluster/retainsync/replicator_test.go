package retainsync

import (
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/cluster/hlc"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/retained"
)

// holder is an in-memory retained index with the broker's rule.
type holder struct {
	ix        retained.Index
	forgotten []string
}

func (h *holder) ApplyRetained(m *message.Message) bool {
	return h.ix.SetIf(m, func(cur *message.Message) bool { return !retained.Newer(m, cur.Stamp, cur.Origin) })
}
func (h *holder) RetainedMessages(fn func(*message.Message) bool) { h.ix.All(fn) }
func (h *holder) RetainedTombstones() []*message.Message          { return nil }
func (h *holder) ForgetTombstone(topic string, _ uint64)          { h.forgotten = append(h.forgotten, topic) }

type sent struct{ n int }

func (s *sent) SendRetained([]byte) { s.n++ }

// TestTombstoneBeatsOlderWritesUntilItExpires: a deletion from a peer is
// remembered, so an older write arriving later is ignored even though no
// message is held; a newer one is applied; after TTL the sweep forgets the
// tombstone here and in the store, and it leaves the snapshot.
func TestTombstoneBeatsOlderWritesUntilItExpires(t *testing.T) {
	clk := clocktest.New(time.Unix(1000, 0))
	h, peers := &holder{}, &sent{}
	r := New(Config{Holder: h, Peers: peers, Clock: clk, HLC: &hlc.Clock{}, TTL: time.Minute})
	stamp := uint64(time.Unix(1000, 0).UnixMilli()) << hlc.LogicalBits
	r.Apply(&message.Message{Topic: "a", Payload: []byte("v1"), Retain: true, Stamp: stamp, Origin: "n1"})
	r.Apply(&message.Message{Topic: "a", Retain: true, Stamp: stamp + 2, Origin: "n2"}) // deletion
	if h.ix.Get("a") != nil {
		t.Fatal("deletion not applied")
	}
	r.Apply(&message.Message{Topic: "a", Payload: []byte("late"), Retain: true, Stamp: stamp + 1, Origin: "n3"})
	if h.ix.Get("a") != nil {
		t.Fatal("an update older than the tombstone brought the message back")
	}
	if got := len(r.Snapshot()); got != 1 {
		t.Fatalf("snapshot has %d entries, want the tombstone", got)
	}
	if s := r.Stamp(); s <= stamp+2 {
		t.Fatalf("stamp %d not after the observed %d", s, stamp+2)
	}
	clk.Advance(2 * time.Minute)
	r.Sweep()
	if len(h.forgotten) != 1 || h.forgotten[0] != "a" || len(r.Snapshot()) != 0 {
		t.Fatalf("after TTL: forgotten %v, snapshot %d", h.forgotten, len(r.Snapshot()))
	}
	r.Apply(&message.Message{Topic: "a", Payload: []byte("v3"), Retain: true, Stamp: stamp + 3, Origin: "n1"})
	if m := h.ix.Get("a"); m == nil || string(m.Payload) != "v3" {
		t.Fatalf("a newer update after the sweep: %v", m)
	}
	r.Replicate(&message.Message{Topic: "b", Payload: []byte("x"), Retain: true, Stamp: r.Stamp(), Origin: "me"})
	if peers.n != 1 {
		t.Fatalf("a local update was sent %d times, want once", peers.n)
	}
}
