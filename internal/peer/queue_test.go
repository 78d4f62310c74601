package peer

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestDataQueueAgainstModel runs random pushes, evictions and pops against
// a plain slice and compares contents, counts and bytes after every step.
func TestDataQueueAgainstModel(t *testing.T) {
	seed := uint64(20240611)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	var q dataQueue
	var model []*Publish
	for step := range 20000 {
		switch op := r.IntN(10); {
		case op < 5:
			p := &Publish{Msg: []byte(strconv.Itoa(step)), QoS: byte(r.IntN(3))}
			q.push(p)
			model = append(model, p)
		case op < 7:
			got := q.dropOldestQoS0()
			i := slices.IndexFunc(model, func(p *Publish) bool { return p.QoS == 0 })
			if got != (i >= 0) {
				t.Fatalf("step %d: dropOldestQoS0 %v, model has QoS 0 at %d", step, got, i)
			}
			if i >= 0 {
				model = slices.Delete(model, i, i+1)
			}
		default:
			limit := 1 + r.IntN(64)
			out := q.pop(nil, limit)
			n, size := 0, 0
			for n < len(model) && (n == 0 || size+model[n].size() <= limit) {
				size += model[n].size()
				n++
			}
			if !slices.Equal(out, model[:n]) {
				t.Fatalf("step %d: popped %d items, model %d", step, len(out), n)
			}
			model = model[n:]
		}
		bytes := 0
		for _, p := range model {
			bytes += p.size()
		}
		if q.live != len(model) || q.bytes != bytes {
			t.Fatalf("step %d: queue live=%d bytes=%d, model %d %d", step, q.live, q.bytes, len(model), bytes)
		}
		if len(q.items)-q.head > 2*max(q.live, 64)+1 {
			t.Fatalf("step %d: %d slots for %d live items", step, len(q.items)-q.head, q.live)
		}
	}
	if n := q.clear(); n != len(model) {
		t.Fatalf("clear returned %d, want %d", n, len(model))
	}
}

// TestOutboxAgainstModel runs random pushes, evictions, takes,
// acknowledgements and rewinds against a model (a list of waiting
// messages and a list of sent, unacknowledged ones) and compares, after
// every step, what the outbox holds, its counts and its bytes.
func TestOutboxAgainstModel(t *testing.T) {
	seed := uint64(20250214)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	o := newOutbox(7, 1)
	var waiting, sent []*Publish
	var next, next0, top uint64 = 1, 1, 0
	for step := range 30000 {
		switch op := r.IntN(20); {
		case op < 8:
			p := &Publish{Msg: []byte(strconv.Itoa(step)), QoS: byte(r.IntN(3))}
			o.push(p)
			if p.QoS > 0 {
				if p.seq != next {
					t.Fatalf("step %d: numbered %d, want %d", step, p.seq, next)
				}
				next++
			} else {
				if p.seq != next0 {
					t.Fatalf("step %d: QoS 0 message numbered %d, want %d", step, p.seq, next0)
				}
				next0++
			}
			waiting = append(waiting, p)
		case op < 10:
			got := o.dropOldestQoS0()
			i := slices.IndexFunc(waiting, func(p *Publish) bool { return p.QoS == 0 })
			if got != (i >= 0) {
				t.Fatalf("step %d: dropOldestQoS0 %v, model has QoS 0 at %d", step, got, i)
			}
			if i >= 0 {
				waiting = slices.Delete(waiting, i, i+1)
			}
		case op < 15:
			limit := 1 + r.IntN(64)
			out := o.take(nil, limit)
			n, size := 0, 0
			for n < len(waiting) && (n == 0 || size+waiting[n].size() <= limit) {
				size += waiting[n].size()
				n++
			}
			if !slices.Equal(out, waiting[:n]) {
				t.Fatalf("step %d: took %d messages, model %d", step, len(out), n)
			}
			for _, p := range waiting[:n] {
				if p.QoS > 0 {
					sent = append(sent, p)
					top = max(top, p.seq)
				}
			}
			waiting = waiting[n:]
		case op < 18:
			// Acknowledge some prefix of what was sent (or a bogus number).
			var seq uint64
			switch {
			case len(sent) > 0 && r.IntN(4) > 0:
				seq = sent[r.IntN(len(sent))].seq
			default:
				seq = uint64(r.IntN(int(next) + 3))
			}
			epoch := uint64(1)
			if r.IntN(10) == 0 {
				epoch = 2 // another epoch's acknowledgement releases nothing
			}
			before := o.base()
			got := o.ack(7, epoch, seq)
			want := 0
			if epoch == 1 && seq >= before && seq <= top {
				for len(sent) > 0 && sent[0].seq <= seq {
					sent = sent[1:]
					want++
				}
				for len(waiting) > 0 && waiting[0].QoS > 0 && waiting[0].seq <= seq {
					waiting = waiting[1:]
					want++
				}
			}
			if got != want {
				t.Fatalf("step %d: ack(%d, epoch %d) released %d, model %d", step, seq, epoch, got, want)
			}
		default:
			if n := o.rewind(); n != len(sent) {
				t.Fatalf("step %d: rewound %d, model %d", step, n, len(sent))
			}
			waiting = append(slices.Clone(sent), waiting...)
			sent = nil
		}
		bytes := 0
		for _, p := range waiting {
			bytes += p.size()
		}
		for _, p := range sent {
			bytes += p.size()
		}
		if o.live() != len(waiting)+len(sent) || o.bytes() != bytes || o.unacked() != len(sent) {
			t.Fatalf("step %d: outbox live=%d bytes=%d unacked=%d, model %d %d %d",
				step, o.live(), o.bytes(), o.unacked(), len(waiting)+len(sent), bytes, len(sent))
		}
		if len(sent) > 0 && o.base() > sent[0].seq {
			t.Fatalf("step %d: base %d above the oldest unacknowledged %d", step, o.base(), sent[0].seq)
		}
	}
	if n := o.clear(); n != len(waiting)+len(sent) {
		t.Fatalf("clear returned %d, want %d", n, len(waiting)+len(sent))
	}
}

// TestInboxDedupOrderAndEpochs walks an inbox through what its origin's
// paths can do to a stream: duplicates, gaps, a base ahead of it, stale
// and new epochs, and a restart of the origin.
func TestInboxDedupOrderAndEpochs(t *testing.T) {
	var in inbox
	if ok, _ := in.admit(10, 1, 1); !ok {
		t.Fatal("first frame refused")
	}
	want := func(seq uint64, v verdict) {
		t.Helper()
		if got := in.accept(seq); got != v {
			t.Fatalf("seq %d: verdict %d, want %d", seq, got, v)
		}
	}
	want(1, deliver)
	want(2, deliver)
	want(2, duplicate)
	for _, q := range []struct {
		seq uint64
		v   verdict
	}{{1, deliver}, {3, deliver}, {2, duplicate}, {3, duplicate}, {4, deliver}} {
		if got := in.acceptQoS0(q.seq); got != q.v {
			t.Fatalf("QoS 0 message %d: verdict %d, want %d", q.seq, got, q.v)
		}
	}
	want(4, early) // 3 is missing: 4 is skipped, not held
	want(3, deliver)
	want(4, deliver)
	// Delayed acknowledgement: it waits for more, up to the delay, unless
	// enough are due or a frame goes to the origin anyway.
	t0 := time.Unix(100, 0)
	if !in.noteDue(t0) || in.noteDue(t0.Add(time.Millisecond)) {
		t.Fatal("noteDue: not due from the first decided message")
	}
	if _, ok, wake := in.ack(t0.Add(time.Millisecond), false, 100, 5*time.Millisecond); ok || !wake.Equal(t0.Add(5*time.Millisecond)) {
		t.Fatalf("ack before the delay: sent %v, wake %v", ok, wake)
	}
	if _, ok, _ := in.ack(t0.Add(time.Millisecond), false, 6, 5*time.Millisecond); !ok {
		t.Fatal("ack with `every` messages due waited")
	}
	want(3, duplicate) // a duplicate is acknowledged too (its sender may hold it)
	in.noteDue(t0)
	if a, ok, _ := in.ack(t0.Add(5*time.Millisecond), false, 100, 5*time.Millisecond); !ok || a != (ackFrame{Inc: 10, Gen: 1, Seq: 4}) {
		t.Fatalf("ack after the delay: %+v %v", a, ok)
	}
	if _, ok, wake := in.ack(t0.Add(time.Hour), true, 1, 0); ok || !wake.IsZero() {
		t.Fatal("second ack with nothing new")
	}
	// The origin's base ahead of next (this node's earlier incarnation
	// acknowledged up to 9): skip to it.
	in.admit(10, 1, 10)
	want(9, duplicate)
	want(10, deliver)
	// A stale epoch (an older generation) is refused whole.
	if ok, _ := in.admit(10, 0, 1); ok {
		t.Fatal("older generation admitted")
	}
	// A new generation of the same incarnation (the origin dropped and
	// recreated its outbox, counting the drop itself): a new stream, no
	// loss counted here.
	if ok, lost := in.admit(10, 2, 1); !ok || lost != 0 {
		t.Fatalf("new generation: %v, lost %d", ok, lost)
	}
	want(1, deliver)
	want(3, early) // seen numbered, never delivered
	// The origin restarted (announced in a handshake): what it numbered and
	// this node never got is lost, and counted.
	if lost := in.observe(11); lost != 2 {
		t.Fatalf("restart lost %d, want 2 (2 and 3)", lost)
	}
	if lost := in.observe(11); lost != 0 {
		t.Fatalf("same incarnation again lost %d", lost)
	}
	if ok, lost := in.admit(11, 1, 1); !ok || lost != 0 {
		t.Fatalf("first frame of the new incarnation: %v, lost %d", ok, lost)
	}
	want(1, deliver)
	// A late frame of the old incarnation is stale.
	if ok, _ := in.admit(10, 2, 1); ok {
		t.Fatal("old incarnation admitted")
	}
	// A restart noticed through a frame first (it came through a transit
	// node) counts the same way.
	want(5, early)
	if ok, lost := in.admit(12, 1, 1); !ok || lost != 4 {
		t.Fatalf("restart seen in a frame: %v, lost %d, want 4 (2..5)", ok, lost)
	}
}
