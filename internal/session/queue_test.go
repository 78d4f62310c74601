package session

import (
	"math/rand/v2"
	"testing"

	"github.com/sextantmq/sextant/internal/message"
)

func TestRingFIFOAndGrowth(t *testing.T) {
	var r ring
	for i := 0; i < 100; i++ {
		r.PushBack(Delivery{seq: uint64(i)})
		if i%3 == 0 {
			if got := r.PopFront().seq; got != uint64(i/3) {
				t.Fatalf("pop %d: got seq %d", i, got)
			}
		}
	}
	want := uint64(34)
	for r.Len() > 0 {
		if got := r.PopFront().seq; got != want {
			t.Fatalf("got seq %d want %d", got, want)
		}
		want++
	}
}

func TestRingRemoveAtKeepsOrder(t *testing.T) {
	var r ring
	for i := 0; i < 6; i++ {
		r.PushBack(Delivery{seq: uint64(i)})
	}
	r.PopFront()
	r.PushBack(Delivery{seq: 6})
	r.RemoveAt(2) // removes seq 3
	var got []uint64
	for r.Len() > 0 {
		got = append(got, r.PopFront().seq)
	}
	want := []uint64{1, 2, 4, 5, 6}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
}

func TestInflightIDsWrapAndOutOfOrderAcks(t *testing.T) {
	seed := uint64(7)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	var f inflight
	f.lastPID = 65530 // force wrapping past 65535, skipping 0
	m := &message.Message{Topic: "t"}
	live := map[uint16]bool{}
	for round := 0; round < 2000; round++ {
		if f.unacked < 20 && rng.IntN(2) == 0 {
			d := f.Add(Delivery{Msg: m, QoS: 1})
			if d.pid == 0 || live[d.pid] {
				t.Fatalf("allocated pid %d (zero or in use)", d.pid)
			}
			live[d.pid] = true
			continue
		}
		if len(live) == 0 {
			continue
		}
		// ack a random live id
		var ids []uint16
		f.Each(func(d *Delivery) { ids = append(ids, d.pid) })
		p := ids[rng.IntN(len(ids))]
		if f.Find(p) == nil {
			t.Fatalf("live pid %d not found", p)
		}
		if _, ok := f.Complete(p); !ok {
			t.Fatalf("complete %d failed", p)
		}
		delete(live, p)
		if f.Find(p) != nil {
			t.Fatalf("pid %d still found after completion", p)
		}
		if _, ok := f.Complete(p); ok {
			t.Fatalf("pid %d completed twice", p)
		}
	}
	if f.unacked != len(live) {
		t.Fatalf("unacked %d, live %d", f.unacked, len(live))
	}
	if f.Find(0) != nil {
		t.Fatal("pid 0 found")
	}
}

func TestInflightSparseRestoreSkipsIDsInUse(t *testing.T) {
	var f inflight
	m := &message.Message{Topic: "t"}
	for _, p := range []uint16{10, 12, 65535, 2} {
		f.Restore(Delivery{Msg: m, QoS: 1, pid: p})
	}
	for _, p := range []uint16{10, 12, 65535, 2} {
		if f.Find(p) == nil {
			t.Fatalf("restored pid %d not found", p)
		}
	}
	if f.Find(11) != nil {
		t.Fatal("found a pid that was never restored")
	}
	f.lastPID = 9 // next allocations would collide with 10 and 12
	got := []uint16{f.Add(Delivery{Msg: m}).pid, f.Add(Delivery{Msg: m}).pid, f.Add(Delivery{Msg: m}).pid}
	want := []uint16{11, 13, 14}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("allocated %v, want %v", got, want)
		}
	}
}
