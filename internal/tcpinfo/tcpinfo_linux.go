//go:build linux

package tcpinfo

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RTT returns the round-trip time of c, if c is (or wraps, through a
// NetConn method) a TCP connection: the smallest the kernel has measured on
// it (tcpi_min_rtt, over its last few minutes), else its smoothed estimate.
// The minimum is the network's delay, which placement needs; the smoothed
// estimate also carries the peer's delayed acknowledgements and queueing,
// and drifts with them (from 3.7 to 1.0 ms on loopback, where the network
// takes 0.2 ms).
func RTT(c net.Conn) (time.Duration, bool) {
	sc, ok := underlying(c).(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil || info == nil {
		return 0, false
	}
	return rttOf(info)
}

// rttOf picks the round trip from the kernel's figures, in microseconds.
func rttOf(info *unix.TCPInfo) (time.Duration, bool) {
	switch {
	case info.Min_rtt > 0:
		return time.Duration(info.Min_rtt) * time.Microsecond, true
	case info.Rtt > 0:
		return time.Duration(info.Rtt) * time.Microsecond, true
	}
	return 0, false
}

// underlying unwraps connections that expose the one they wrap (TLS).
func underlying(c net.Conn) net.Conn {
	for range 4 {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = u.NetConn()
	}
	return c
}
