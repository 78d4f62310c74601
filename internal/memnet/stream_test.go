package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

const (
	hostA = "10.0.0.1"
	hostB = "10.0.0.2"
	hostC = "10.0.0.3"
)

// pipe returns a connected pair: c dialled from hostA, s accepted on hostB.
func pipe(t *testing.T, nw *Network) (c, s net.Conn) {
	t.Helper()
	ln, err := nw.Listen(hostB + ":7000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- conn
	}()
	c, err = nw.Dial(context.Background(), hostA, hostB+":7000")
	if err != nil {
		t.Fatal(err)
	}
	return c, <-accepted
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return buf
}

func TestStreamLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 40*time.Millisecond)

		start := time.Now()
		c, s := pipe(t, nw)
		if got := time.Since(start); got != 40*time.Millisecond {
			t.Errorf("dial took %v, want one RTT (40ms)", got)
		}

		start = time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if got := string(readN(t, s, 4)); got != "ping" {
			t.Fatalf("read %q", got)
		}
		if got := time.Since(start); got != 20*time.Millisecond {
			t.Errorf("one-way delivery took %v, want 20ms", got)
		}
		if _, err := s.Write([]byte("pong")); err != nil {
			t.Fatal(err)
		}
		readN(t, c, 4)
		if got := time.Since(start); got != 40*time.Millisecond {
			t.Errorf("round trip took %v, want 40ms", got)
		}
	})
}

func TestStreamKeepsOrderWhenLatencyDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 200*time.Millisecond)
		c, s := pipe(t, nw)
		start := time.Now()
		if _, err := c.Write([]byte("first;")); err != nil {
			t.Fatal(err)
		}
		nw.SetRTT(hostA, hostB, 2*time.Millisecond)
		if _, err := c.Write([]byte("second")); err != nil {
			t.Fatal(err)
		}
		got := readN(t, s, 12)
		if string(got) != "first;second" {
			t.Fatalf("read %q, want the writes in order", got)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("delivered after %v, want 100ms (the first write's latency)", d)
		}
	})
}

func TestStreamBufferIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{StreamBuffer: 1024})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 10*time.Millisecond)
		c, s := pipe(t, nw)
		payload := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
		done := make(chan error, 1)
		go func() {
			_, err := c.Write(payload)
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Write of 4 KiB into a 1 KiB buffer returned (%v) before the reader read", err)
		default:
		}
		if got := readN(t, s, len(payload)); !bytes.Equal(got, payload) {
			t.Fatal("payload corrupted")
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestStreamWriteDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{StreamBuffer: 100})
		defer nw.Close()
		c, _ := pipe(t, nw)
		start := time.Now()
		if err := c.SetWriteDeadline(start.Add(30 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Write(make([]byte, 250))
		if n != 100 {
			t.Errorf("wrote %d bytes, want 100 (the buffer)", n)
		}
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err = %v, want a timeout", err)
		}
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Errorf("timed out after %v, want 30ms", d)
		}
	})
}

func TestStreamReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		c, s := pipe(t, nw)
		start := time.Now()
		_ = s.SetReadDeadline(start.Add(50 * time.Millisecond))
		_, err := s.Read(make([]byte, 8))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("timed out after %v, want 50ms", d)
		}

		// A deadline moved into the past wakes a blocked reader.
		_ = s.SetReadDeadline(time.Time{})
		errc := make(chan error, 1)
		go func() {
			_, err := s.Read(make([]byte, 8))
			errc <- err
		}()
		synctest.Wait()
		_ = s.SetReadDeadline(time.Now().Add(-time.Second))
		if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}

		// Clearing the deadline makes the conn usable again.
		_ = s.SetReadDeadline(time.Time{})
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		readN(t, s, 1)
	})
}

func TestStreamClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 10*time.Millisecond)
		c, s := pipe(t, nw)
		if _, err := c.Write([]byte("bye")); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v, want net.ErrClosed", err)
		}
		if got := string(readN(t, s, 3)); got != "bye" {
			t.Fatalf("read %q", got)
		}
		if _, err := s.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after peer close: %v, want io.EOF", err)
		}
		if _, err := s.Write([]byte("x")); !errors.Is(err, ErrReset) {
			t.Errorf("write to closed peer: %v, want ErrReset", err)
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("read on closed conn: %v, want net.ErrClosed", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("write on closed conn: %v, want net.ErrClosed", err)
		}
		_ = s.Close()
		nw.mu.Lock()
		live := len(nw.mu.streams)
		nw.mu.Unlock()
		if live != 0 {
			t.Errorf("%d streams still registered after both ends closed", live)
		}
	})
}

func TestDialRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 30*time.Millisecond)
		start := time.Now()
		_, err := nw.Dial(context.Background(), hostA, hostB+":1")
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("err = %v, want ErrRefused", err)
		}
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Errorf("refused after %v, want one RTT", d)
		}
	})
}

func TestListenAddressInUse(t *testing.T) {
	nw := New(Options{})
	defer nw.Close()
	ln, err := nw.Listen(hostA + ":80")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nw.Listen(hostA + ":80"); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("second Listen: %v, want ErrAddrInUse", err)
	}
	if _, err := nw.ListenPacket(hostA + ":80"); err != nil {
		t.Fatalf("datagram port must be a separate name space: %v", err)
	}
	_ = ln.Close()
	if _, err := nw.Listen(hostA + ":80"); err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	eph, err := nw.Listen(hostA + ":0")
	if err != nil {
		t.Fatal(err)
	}
	if eph.Addr().(Addr).Port == 0 {
		t.Error("port 0 was not replaced by an ephemeral port")
	}
}

func TestPartitionStallsThenResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{BreakAfter: 5 * time.Second})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 10*time.Millisecond)
		c, s := pipe(t, nw)
		nw.Partition(hostA, hostB)
		start := time.Now()
		if _, err := c.Write([]byte("lost")); err != nil {
			t.Fatalf("write into a stalled stream is buffered: %v", err)
		}
		_, err := s.Read(make([]byte, 4))
		if !errors.Is(err, ErrReset) {
			t.Fatalf("read across partition: %v, want ErrReset", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("reset after %v, want BreakAfter (5s)", d)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, ErrReset) {
			t.Errorf("write after reset: %v, want ErrReset", err)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start = time.Now()
		if _, err := nw.Dial(ctx, hostA, hostB+":7000"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial across partition: %v, want the context's deadline", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("dial gave up after %v, want 2s", d)
		}
	})
}

func TestHealResumesStalledStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{BreakAfter: 5 * time.Second})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 10*time.Millisecond)
		c, s := pipe(t, nw)
		nw.Partition(hostA, hostB)
		if _, err := c.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			readN(t, s, 4)
			got <- time.Now()
		}()
		time.Sleep(time.Second) // lint:sleep-ok advances the bubble's fake clock while partitioned
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("data crossed a partition")
		default:
		}
		healed := time.Now()
		nw.Heal(hostA, hostB)
		if at := <-got; at.Sub(healed) != 5*time.Millisecond {
			t.Errorf("delivered %v after heal, want one-way latency (5ms)", at.Sub(healed))
		}
	})
}

func TestIsolateAndRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{BreakAfter: time.Second})
		defer nw.Close()
		c, s := pipe(t, nw)
		nw.Isolate(hostB)
		if _, err := c.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
			t.Fatalf("read on isolated host: %v, want ErrReset", err)
		}
		// A host that joins later is cut off from the isolated one too.
		ln, err := nw.Listen(hostB + ":9")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := nw.Dial(ctx, hostC, hostB+":9"); err == nil {
			t.Fatal("dial to an isolated host succeeded")
		}
		nw.Rejoin(hostB)
		go func() {
			if c, err := ln.Accept(); err == nil {
				_ = c.Close()
			}
		}()
		conn, err := nw.Dial(context.Background(), hostC, hostB+":9")
		if err != nil {
			t.Fatalf("dial after Rejoin: %v", err)
		}
		_ = conn.Close()
	})
}

// TestStreamTransfer is a conformance check: a large transfer in random
// chunk sizes both ways at once arrives intact (run it with -race).
func TestStreamTransfer(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{StreamBuffer: 4096})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 3*time.Millisecond)
		c, s := pipe(t, nw)
		rng := rand.New(rand.NewPCG(seed, 7))
		mk := func() []byte {
			b := make([]byte, 200_000)
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			return b
		}
		up, down := mk(), mk()
		send := func(conn net.Conn, data []byte, chunkSeed uint64) {
			r := rand.New(rand.NewPCG(chunkSeed, 1))
			for len(data) > 0 {
				k := min(len(data), 1+int(r.UintN(9000)))
				if _, err := conn.Write(data[:k]); err != nil {
					t.Error(err)
					return
				}
				data = data[k:]
			}
		}
		recv := func(conn net.Conn, want []byte, done chan<- struct{}) {
			got, err := io.ReadAll(io.LimitReader(conn, int64(len(want))))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("transfer corrupted (err %v, %d of %d bytes)", err, len(got), len(want))
			}
			done <- struct{}{}
		}
		done := make(chan struct{}, 2)
		go send(c, up, seed)
		go send(s, down, seed+1)
		go recv(s, up, done)
		go recv(c, down, done)
		<-done
		<-done
		if c.LocalAddr().String() != s.RemoteAddr().String() || s.LocalAddr().String() != hostB+":7000" {
			t.Errorf("addresses: c %v->%v, s %v->%v", c.LocalAddr(), c.RemoteAddr(), s.LocalAddr(), s.RemoteAddr())
		}
		if n, err := s.Read(nil); n != 0 || err != nil {
			t.Errorf("zero-length read = %d, %v", n, err)
		}
	})
}

func TestNetworkClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		c, _ := pipe(t, nw)
		ln, err := nw.Listen(hostC + ":1")
		if err != nil {
			t.Fatal(err)
		}
		readErr := make(chan error, 1)
		acceptErr := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			readErr <- err
		}()
		go func() {
			_, err := ln.Accept()
			acceptErr <- err
		}()
		synctest.Wait()
		_ = nw.Close()
		if err := <-readErr; !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked read after Close: %v", err)
		}
		if err := <-acceptErr; !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked accept after Close: %v", err)
		}
		if _, err := nw.Listen(hostA + ":1"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Listen after Close: %v", err)
		}
	})
}

// TestCutOneWay: a one-way cut stalls only its direction of a live stream
// (the other keeps flowing), drops datagrams only that way, refuses new
// streams (their handshake needs both directions), resets a stream still
// cut after BreakAfter, and Heal resumes the stalled direction.
func TestCutOneWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{BreakAfter: 5 * time.Second})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 10*time.Millisecond)
		c, s := pipe(t, nw)
		nw.CutOneWay(hostA, hostB)
		if _, err := c.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte("flows")); err != nil {
			t.Fatal(err)
		}
		if got := readN(t, c, 5); string(got) != "flows" {
			t.Fatalf("b->a across an a->b cut: %q", got)
		}
		got := make(chan string, 1)
		go func() { got <- string(readN(t, s, 4)) }()
		time.Sleep(time.Second) // lint:sleep-ok advances the bubble's fake clock while cut
		synctest.Wait()
		select {
		case g := <-got:
			t.Fatalf("%q crossed a one-way cut", g)
		default:
		}

		pa, pb := listenPacket(t, nw, hostA+":1"), listenPacket(t, nw, hostB+":1")
		if _, err := pa.WriteTo([]byte("x"), pb.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		if _, err := pb.WriteTo([]byte("y"), pa.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, _, err := pa.ReadFrom(buf); err != nil || buf[0] != 'y' {
			t.Fatalf("datagram b->a: %q, %v", buf, err)
		}
		_ = pb.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, _, err := pb.ReadFrom(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("datagram a->b across the cut: %v, want none", err)
		}

		for _, dir := range [][2]string{{hostA, hostB}, {hostB, hostA}} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if _, err := nw.Dial(ctx, dir[0], dir[1]+":7000"); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("dial %s->%s across a one-way cut: %v, want the context's deadline", dir[0], dir[1], err)
			}
			cancel()
		}

		healed := time.Now()
		nw.Heal(hostA, hostB)
		if g := <-got; g != "held" {
			t.Fatalf("after heal: %q", g)
		}
		if d := time.Since(healed); d != 5*time.Millisecond {
			t.Errorf("delivered %v after heal, want the one-way latency (5ms)", d)
		}

		// Cut again and leave it: the stream is reset after BreakAfter.
		nw.CutOneWay(hostB, hostA)
		start := time.Now()
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
			t.Fatalf("read across a lasting cut: %v, want ErrReset", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("reset after %v, want BreakAfter (5s)", d)
		}
	})
}

// TestBreakResetsStreamsOnly: Break resets the streams between two hosts,
// leaves others alone, and new streams open at once.
func TestBreakResetsStreamsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 10*time.Millisecond)
		c, s := pipe(t, nw)
		ln, err := nw.Listen(hostC + ":7000")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		other, err := nw.Dial(context.Background(), hostA, hostC+":7000")
		if err != nil {
			t.Fatal(err)
		}
		oc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		nw.Break(hostB, hostA)
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
			t.Fatalf("read after Break: %v, want ErrReset", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, ErrReset) {
			t.Fatalf("write after Break: %v, want ErrReset", err)
		}
		if _, err := other.Write([]byte("ok")); err != nil {
			t.Fatal(err)
		}
		if got := readN(t, oc, 2); string(got) != "ok" {
			t.Fatalf("stream a-c after Break(a, b): %q", got)
		}
		c2, s2 := pipe2(t, nw)
		if _, err := c2.Write([]byte("new")); err != nil {
			t.Fatal(err)
		}
		if got := readN(t, s2, 3); string(got) != "new" {
			t.Fatalf("new stream after Break: %q", got)
		}
	})
}

// pipe2 is pipe on another port of hostB.
func pipe2(t *testing.T, nw *Network) (c, s net.Conn) {
	t.Helper()
	ln, err := nw.Listen(hostB + ":7001")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	c, err = nw.Dial(context.Background(), hostA, hostB+":7001")
	if err != nil {
		t.Fatal(err)
	}
	s, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
