//go:build linux

package netx

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// rawConn is a TCP connection whose Read and Write make raw system calls on
// the non-blocking socket the runtime's netpoller owns: a read that finds
// nothing, or a write that finds the socket full, waits for the netpoller
// as the standard ones do (deadlines and Close behave the same), but a call
// that succeeds skips the scheduler's system-call bookkeeping. That
// bookkeeping wakes the runtime's monitor thread whenever a call is made
// while every processor was idle, which is most calls at moderate rates,
// and the monitor then polls every 20 µs until the process is idle again:
// on a virtual machine where a timed sleep costs ~30 µs of CPU, that was
// ~40% of a node's CPU at 1,000 msg/s over a peer link (BENCHMARKS.md).
// Each direction has its own lock and scratch fields, so a reader and a
// writer never wait for each other; net.Conn's rule that concurrent
// Writes do not interleave holds because RawConn.Write holds the socket's
// write lock for the whole loop.
type rawConn struct {
	*net.TCPConn
	rc syscall.RawConn

	rmu sync.Mutex
	r   RawReader

	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool
}

// RawTCP returns c with raw-system-call reads and writes if c is a plain
// TCP connection, else c unchanged.
func RawTCP(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawConn{TCPConn: tc, rc: rc}
	r.r.Init(rc)
	r.writeFn = r.write
	return r
}

// NetConn returns the TCP connection (for option setters that look for it).
func (c *rawConn) NetConn() net.Conn { return c.TCPConn }

// PassThrough returns the TCP connection, to which this one passes bytes
// unchanged (an MQTT session then reads and writes the socket itself).
func (c *rawConn) PassThrough() net.Conn { return c.TCPConn }

// RawReader reads a non-blocking socket with raw system calls, waiting
// for readability through the netpoller (RawConn.Read) when it is empty.
// One goroutine reads at a time; its scratch fields make a read allocate
// nothing.
type RawReader struct {
	rc     syscall.RawConn
	buf    []byte
	n      int
	errno  syscall.Errno
	readFn func(fd uintptr) bool
}

// Init makes r read rc.
func (r *RawReader) Init(rc syscall.RawConn) {
	r.rc = rc
	r.readFn = r.read
}

func (r *RawReader) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait for readability, then call again
		case 0:
			r.n, r.errno = int(n), 0
		default:
			r.n, r.errno = 0, e
		}
		return true
	}
}

// Read reads into p, waiting (with the connection's read deadline) until
// there is something to read. A failed read system call returns its
// *os.SyscallError ("read"); a deadline or Close, RawConn.Read's error.
func (r *RawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.buf = p
	err := r.rc.Read(r.readFn)
	r.buf = nil
	switch {
	case err != nil:
		return 0, err // deadline, closed
	case r.errno != 0:
		return 0, os.NewSyscallError("read", r.errno)
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

func (c *rawConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	n, err := c.r.Read(p)
	var se *os.SyscallError
	if errors.As(err, &se) {
		err = &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: se}
	}
	return n, err
}

// RawSend makes one raw send of b (not empty) on the non-blocking socket
// fd, retried only when a signal interrupted it: what the socket took, or
// the error (EAGAIN: full), never waiting and never raising SIGPIPE.
func RawSend(fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
		switch e {
		case syscall.EINTR:
			continue
		case 0:
			return int(n), 0
		}
		return 0, e
	}
}

func (c *rawConn) write(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		n, e := RawSend(fd, c.wbuf[c.wn:])
		switch e {
		case 0:
			c.wn += n
		case syscall.EAGAIN:
			return false // wait for writability, then go on
		default:
			c.werrno = e
			return true
		}
	}
	return true
}

func (c *rawConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wn, c.werrno = p, 0, 0
	err := c.rc.Write(c.writeFn)
	c.wbuf = nil
	switch {
	case err != nil:
		return c.wn, err // deadline, closed
	case c.werrno != 0:
		return c.wn, c.opError("write", c.werrno)
	}
	return c.wn, nil
}

// opError is the error the standard connection returns for errno.
func (c *rawConn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}
