//go:build linux

package tcpinfo

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RTT returns the kernel's smoothed round-trip time estimate of c, if c is
// (or wraps, through a NetConn method) a TCP connection.
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
	}); err != nil || gerr != nil || info == nil || info.Rtt == 0 {
		return 0, false
	}
	return time.Duration(info.Rtt) * time.Microsecond, true
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
