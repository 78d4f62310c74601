//go:build !linux

package tcpinfo

import (
	"net"
	"time"
)

// RTT is unavailable off Linux.
func RTT(c net.Conn) (time.Duration, bool) { return 0, false }
