//go:build unix

package meta

import (
	"errors"
	"net"
	"syscall"
)

// peekOpen asks the socket under c, without waiting or consuming
// anything, whether its other end closed it: a read with a passed deadline
// on a net.Conn answers a timeout before it looks at the socket. ok is
// false when c is not a socket.
func peekOpen(c net.Conn) (alive, ok bool) {
	sc, isSock := c.(syscall.Conn)
	if !isSock {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, true
	}
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, perr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(perr, syscall.EAGAIN) || errors.Is(perr, syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return alive && err == nil, true
}
