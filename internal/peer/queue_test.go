package peer

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
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
