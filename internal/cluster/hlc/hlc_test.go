package hlc

import (
	"testing"
	"time"
)

func TestHLCIsMonotonicAndFollowsPeers(t *testing.T) {
	var h Clock
	now := time.Unix(1000, 0)
	a := h.Stamp(now)
	if a>>LogicalBits != uint64(now.UnixMilli()) || !Time(a).Equal(now) {
		t.Fatalf("stamp %x does not carry the physical time", a)
	}
	b := h.Stamp(now) // same millisecond: the counter moves
	if b != a+1 {
		t.Fatalf("second stamp in one millisecond %d, want %d", b, a+1)
	}
	now = now.Add(-time.Second) // the wall clock steps back
	if c := h.Stamp(now); c <= b {
		t.Fatalf("stamp went backwards with the clock: %d after %d", c, b)
	}
	ahead := uint64(time.Unix(2000, 0).UnixMilli()) << LogicalBits
	h.Observe(ahead) // a peer's clock runs ahead
	if d := h.Stamp(now); d <= ahead {
		t.Fatalf("stamp %d not after an observed %d", d, ahead)
	}
	h.Observe(1) // an old stamp changes nothing
	if e := h.Stamp(now); e <= ahead+1 {
		t.Fatalf("stamp %d after observing an old one", e)
	}
}
