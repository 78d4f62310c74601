package node

import (
	"testing"

	"github.com/sextantmq/sextant/internal/sequencer"
)

// TestRecentBytesMapsTheFlag: --group-recent-bytes 0 keeps no records in
// memory, which the sequencer spells negative (its 0 is its default).
func TestRecentBytesMapsTheFlag(t *testing.T) {
	for flag, want := range map[int64]int{0: -1, 1: 1, sequencer.DefaultRecentBytes: sequencer.DefaultRecentBytes, 64 << 20: 64 << 20} {
		if got := recentBytes(flag); got != want {
			t.Errorf("recentBytes(%d) = %d, want %d", flag, got, want)
		}
	}
}
