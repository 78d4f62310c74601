package node

import (
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
)

// TestPinnedCoordinate: placement-coordinate's milliseconds become a
// coordinate of the gossip's dimensionality whose distances are the ones
// given (plus the two least heights), so it compares with any other.
func TestPinnedCoordinate(t *testing.T) {
	if c, err := pinnedCoordinate(""); c != nil || err != nil {
		t.Fatalf("empty: %v, %v", c, err)
	}
	if _, err := pinnedCoordinate("x"); err == nil {
		t.Fatal("x accepted")
	}
	a, err := pinnedCoordinate("0,0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pinnedCoordinate("30,40")
	if err != nil {
		t.Fatal(err)
	}
	measured := coordinate.NewCoordinate(coordinate.DefaultConfig())
	if len(b.Vec) != len(measured.Vec) || !b.IsValid() {
		t.Fatalf("pinned %+v: not like the gossip's (%d dimensions)", b, len(measured.Vec))
	}
	heights := 2 * time.Duration(coordinate.DefaultConfig().HeightMin*float64(time.Second))
	if got := coords.RTT(a, b); got != 50*time.Millisecond+heights {
		t.Fatalf("RTT between 0,0 and 30,40: %v, want 50 ms + %v", got, heights)
	}
	_ = coords.RTT(b, measured) // same dimensionality: does not panic
}
