// Package hlc is the hybrid logical clock of the cluster layer: stamps that
// order retained updates (last writer wins, package retainsync) and session
// claims (package directory) across nodes. A stamp is the physical time in
// milliseconds shifted left by LogicalBits, plus a logical counter. Every
// stamp a Clock issues is greater than every stamp it issued or observed
// before, and stays close to physical time: if the wall clock stalls or
// steps back, or a peer's clock runs ahead, the counter advances instead
// (and carries into the millisecond field if it overflows).
//
// It is a pure core: the caller passes the physical time in. A Clock is
// safe for concurrent use (one mutex). Anything may import it.
package hlc

import (
	"sync"
	"time"
)

// LogicalBits is the width of the logical counter in a stamp.
const LogicalBits = 16

// Clock issues stamps. The zero value is ready to use.
type Clock struct {
	mu struct {
		sync.Mutex
		last uint64
	}
}

// Stamp returns a new stamp at physical time now.
func (c *Clock) Stamp(now time.Time) uint64 {
	pt := uint64(now.UnixMilli()) << LogicalBits
	c.mu.Lock()
	defer c.mu.Unlock()
	if pt > c.mu.last {
		c.mu.last = pt
	} else {
		c.mu.last++
	}
	return c.mu.last
}

// Observe folds in a stamp seen on a message or claim from elsewhere.
func (c *Clock) Observe(stamp uint64) {
	c.mu.Lock()
	if stamp > c.mu.last {
		c.mu.last = stamp
	}
	c.mu.Unlock()
}

// Time returns the physical time a stamp carries.
func Time(stamp uint64) time.Time { return time.UnixMilli(int64(stamp >> LogicalBits)) }
