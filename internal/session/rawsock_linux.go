//go:build linux

package session

import (
	"net"
	"os"
	"syscall"

	"github.com/sextantmq/sextant/internal/netx"
)

// rawSock reads and writes the socket of a plain TCP connection with raw
// system calls. The socket is non-blocking (the runtime's netpoller owns it),
// so a call never blocks: a read that finds nothing waits for readability
// through the netpoller like any other read, and a write that finds the
// socket full reports what it wrote. Raw calls skip the scheduler's syscall
// bookkeeping, which at moderate rates costs more than the call itself: each
// ordinary system call made while the process was idle wakes the runtime's
// monitor thread.
//
// The reader goroutine uses the read half; the holder of the writer role the
// write half: each half has its own scratch fields.
type rawSock struct {
	rc syscall.RawConn

	netx.RawReader // the read half

	wbuf    []byte
	wn      int
	werrno  syscall.Errno
	writeFn func(fd uintptr)
}

// newRawSock returns the raw socket of nc if nc is a plain TCP connection,
// directly or behind wrappers that pass bytes through unchanged (see
// passThrough); nil otherwise (TLS, WebSocket, in-memory connections).
func newRawSock(nc net.Conn) *rawSock {
	for range 4 {
		if tc, ok := nc.(*net.TCPConn); ok {
			rc, err := tc.SyscallConn()
			if err != nil {
				return nil
			}
			r := &rawSock{rc: rc}
			r.Init(rc)
			r.writeFn = r.write
			return r
		}
		p, ok := nc.(passThrough)
		if !ok {
			return nil
		}
		nc = p.PassThrough()
	}
	return nil
}

// write makes one attempt: the caller falls back to a blocking write.
func (r *rawSock) write(fd uintptr) { r.wn, r.werrno = netx.RawSend(fd, r.wbuf) }

// TryWrite writes as much of b as the socket accepts now, without waiting.
// A full socket is not an error: it returns the count written (0 or a
// partial count). Any error means the caller must leave the bytes to a
// blocking write, which reports the failure properly (and applies the write
// deadline: a write that does not wait has none to miss).
//
// It makes the call through Control, which only holds a reference to the
// descriptor (a close waits for it), not through the runtime's raw Write,
// which also takes the write lock and re-arms the netpoller's write state:
// neither is needed by a single attempt that never waits, and in a fan-out
// they were a tenth of the broker's own time per delivery. The holder of
// the writer role is the only writer, so no lock is needed against others.
func (r *rawSock) TryWrite(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.wbuf = b
	err := r.rc.Control(r.writeFn)
	r.wbuf = nil
	switch {
	case err != nil:
		return 0, err
	case r.werrno == syscall.EAGAIN:
		return 0, nil
	case r.werrno != 0:
		return 0, os.NewSyscallError("sendto", r.werrno)
	}
	return r.wn, nil
}
