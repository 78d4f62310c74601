//go:build linux

package tcpinfo

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRTTIsTheMinimum: the kernel's minimum round trip is reported when it
// has one (the smoothed estimate drifts with delayed acknowledgements), the
// smoothed one otherwise.
func TestRTTIsTheMinimum(t *testing.T) {
	for _, c := range []struct {
		srtt, min uint32
		want      time.Duration
		ok        bool
	}{
		{3700, 200, 200 * time.Microsecond, true},
		{1000, 0, time.Millisecond, true},
		{0, 0, 0, false},
	} {
		got, ok := rttOf(&unix.TCPInfo{Rtt: c.srtt, Min_rtt: c.min})
		if got != c.want || ok != c.ok {
			t.Errorf("srtt %d µs, min %d µs: %v %v; want %v %v", c.srtt, c.min, got, ok, c.want, c.ok)
		}
	}
}
