package netx

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
)

// DialFunc opens a stream to addr ("host:port") within ctx: how peer
// links, the metadata group and gossip dial (DialTCP, Host.Dial, or an
// in-memory network's in tests).
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// Host is the host's own network: TCP streams and UDP datagrams.
type Host struct{}

// Listen listens for TCP streams on addr ("host:port"; port 0 picks one).
// Accepted connections read and write with raw system calls (RawTCP).
func (Host) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return rawListener{ln}, nil
}

// rawListener hands out its accepted connections through RawTCP.
type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return RawTCP(c), nil
}

// ListenPacket listens for UDP datagrams on addr.
func (Host) ListenPacket(addr string) (net.PacketConn, error) { return net.ListenPacket("udp", addr) }

// Dial opens a TCP stream to addr.
func (Host) Dial(ctx context.Context, addr string) (net.Conn, error) { return DialTCP(ctx, addr) }

// DialTCP opens a TCP stream to addr ("host:port") within ctx; it reads
// and writes with raw system calls (RawTCP).
func DialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return RawTCP(c), nil
}

// Probe asks what answers at addr: it dials, writes hello and returns up
// to n bytes of the answer, all within timeout (and ctx's cancellation).
// Commands use it after a failed exchange to say what they found there.
func Probe(ctx context.Context, addr string, timeout time.Duration, hello []byte, n int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := DialTCP(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write(hello); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	got, err := io.ReadAtLeast(conn, buf, n)
	return buf[:got], err
}

// Backoff bounds of Accept's retry after a failed Accept.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// Accept calls ln.Accept until ln is closed or ctx ends, and passes every
// connection to serve on this goroutine (serve hands it off quickly; it
// returns false to end the loop, for instance when its owner is closing,
// and then owns the connection it was given). A failed Accept other than
// a closed listener (out of file descriptors, and the like) is logged and
// retried after a pause from 5 ms doubling to 1 s, reset by the next
// success: neither spinning nor giving up on the listener. clk paces the
// pauses (nil: the wall clock).
func Accept(ctx context.Context, ln net.Listener, clk clock.Clock, log *slog.Logger, serve func(net.Conn) bool) {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	backoff := acceptBackoffMin
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			log.Warn("accept failed; retrying", "addr", ln.Addr().String(), "err", err, "backoff", backoff)
			t := clk.NewTimer(backoff)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, acceptBackoffMax)
			continue
		}
		backoff = acceptBackoffMin
		if !serve(c) {
			return
		}
	}
}
