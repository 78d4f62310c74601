//go:build linux

package netx

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rawPair returns both ends of a loopback TCP connection made by Host, so
// that both are raw connections.
func rawPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := Host{}.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = Host{}.Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	for _, c := range []net.Conn{client, server} {
		if _, ok := c.(*rawConn); !ok {
			t.Fatalf("Host gave a %T, want a raw connection", c)
		}
	}
	return client, server
}

func TestRawConnCarriesBytesBothWaysAndEndsWithEOF(t *testing.T) {
	c, s := rawPair(t)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	if _, err := s.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "world" {
		t.Fatalf("client read %q, %v", buf, err)
	}
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Fatalf("empty write: %d, %v", n, err)
	}
	_ = c.Close()
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}

// A write larger than the socket buffers waits for the reader (the EAGAIN
// path) and still arrives whole and in order.
func TestRawConnLargeWriteWaitsForTheReader(t *testing.T) {
	c, s := rawPair(t)
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() {
		n, err := c.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		errc <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
}

// Concurrent writers do not interleave their buffers, even when each
// buffer takes several system calls.
func TestRawConnConcurrentWritesDoNotInterleave(t *testing.T) {
	c, s := rawPair(t)
	const writers, size = 4, 1 << 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Write(bytes.Repeat([]byte{byte('a' + w)}, size)); err != nil {
				t.Error(err)
			}
		}()
	}
	got := make([]byte, writers*size)
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := 0; i < len(got); i += size {
		block := got[i : i+size]
		if bytes.Count(block, block[:1]) != size {
			t.Fatalf("block %d mixes writers", i/size)
		}
	}
}

func TestRawConnHonoursDeadlinesAndClose(t *testing.T) {
	c, s := rawPair(t)
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := s.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want a deadline error", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v is not a timeout", err)
	}
	_ = s.SetReadDeadline(time.Time{})

	// A write that cannot finish (nobody reads) ends at its deadline with
	// the count it got out.
	_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := c.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n <= 0 || n >= 64<<20 {
		t.Fatalf("blocked write: %d, %v; want a partial count and a deadline error", n, err)
	}

	// Close ends a blocked read with net.ErrClosed.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		errc <- err
	}()
	_ = c.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed connection: %v, want net.ErrClosed", err)
	}
}

// A reset connection reports the system's errors, as the standard one does.
func TestRawConnReportsReset(t *testing.T) {
	c, s := rawPair(t)
	tc := c.(*rawConn).TCPConn
	_ = tc.SetLinger(0) // close sends RST
	_ = c.Close()
	_, err := s.Read(make([]byte, 1)) // waits for the RST
	var oe *net.OpError
	if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read from a reset connection: %v, want a read OpError with ECONNRESET", err)
	}
	_, err = s.Write([]byte("x"))
	if !errors.Is(err, syscall.EPIPE) || !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("write to a reset connection: %v, want a write OpError with EPIPE", err)
	}
}

// RawTCP leaves anything other than a TCP connection alone.
func TestRawTCPLeavesOtherConnectionsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := RawTCP(a); got != a {
		t.Fatalf("RawTCP(pipe) = %T, want the pipe", got)
	}
}
