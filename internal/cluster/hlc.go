package cluster

import (
	"sync"

	"github.com/sextantmq/sextant/internal/clock"
)

// logicalBits is the width of the logical counter in a stamp.
const logicalBits = 16

// hlc is a hybrid logical clock: a stamp is the physical time in
// milliseconds shifted left by logicalBits, plus a logical counter. Every
// stamp it issues is greater than every stamp it issued or observed before,
// and stays close to physical time: if the wall clock stalls or steps back,
// or a peer's clock runs ahead, the counter advances instead (and carries
// into the millisecond field if it overflows).
type hlc struct {
	clock clock.Clock
	mu    struct {
		sync.Mutex
		last uint64
	}
}

// now returns a new stamp.
func (h *hlc) now() uint64 {
	pt := uint64(h.clock.Now().UnixMilli()) << logicalBits
	h.mu.Lock()
	defer h.mu.Unlock()
	if pt > h.mu.last {
		h.mu.last = pt
	} else {
		h.mu.last++
	}
	return h.mu.last
}

// observe folds in a stamp seen on a message from elsewhere.
func (h *hlc) observe(ts uint64) {
	h.mu.Lock()
	if ts > h.mu.last {
		h.mu.last = ts
	}
	h.mu.Unlock()
}
