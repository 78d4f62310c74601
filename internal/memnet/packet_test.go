package memnet

import (
	"errors"
	"math"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

func listenPacket(t *testing.T, nw *Network, addr string) net.PacketConn {
	t.Helper()
	pc, err := nw.ListenPacket(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc
}

func TestPacketLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		if err := nw.SetMatrix([]string{hostA, hostB}, [][]time.Duration{{0, 80 * time.Millisecond}, {80 * time.Millisecond, 0}}); err != nil {
			t.Fatal(err)
		}
		a := listenPacket(t, nw, hostA+":5000")
		b := listenPacket(t, nw, hostB+":5000")
		start := time.Now()
		if _, err := a.WriteTo([]byte("hello"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		n, from, err := b.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 40*time.Millisecond {
			t.Errorf("datagram took %v, want 40ms", d)
		}
		if string(buf[:n]) != "hel" {
			t.Errorf("read %q, want the datagram truncated to the buffer", buf[:n])
		}
		if from.String() != hostA+":5000" {
			t.Errorf("from %v", from)
		}
	})
}

func TestPacketLoss(t *testing.T) {
	const seed, sent, p = 42, 4000, 0.25
	t.Logf("seed %d", seed)
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{Seed: seed, PacketQueue: sent})
		defer nw.Close()
		nw.SetLoss(hostA, hostB, p)
		a := listenPacket(t, nw, hostA+":1")
		b := listenPacket(t, nw, hostB+":1")
		for range sent {
			if _, err := a.WriteTo([]byte{1}, b.LocalAddr()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		_ = b.SetReadDeadline(time.Now())
		got := 0
		for {
			if _, _, err := b.ReadFrom(make([]byte, 1)); err != nil {
				break
			}
			got++
		}
		lost := float64(sent-got) / sent
		sd := math.Sqrt(p * (1 - p) / sent)
		if math.Abs(lost-p) > 4*sd {
			t.Errorf("lost %.3f of datagrams, want %.2f ± %.3f", lost, p, 4*sd)
		}
		t.Logf("lost %.3f (configured %.2f)", lost, p)
	})
}

func TestPacketQueueOverflowDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{PacketQueue: 3})
		defer nw.Close()
		a := listenPacket(t, nw, hostA+":1")
		b := listenPacket(t, nw, hostB+":1")
		for i := range 5 {
			if _, err := a.WriteTo([]byte{byte(i)}, b.LocalAddr()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		_ = b.SetReadDeadline(time.Now())
		got := 0
		for {
			if _, _, err := b.ReadFrom(make([]byte, 1)); err != nil {
				break
			}
			got++
		}
		if got != 3 {
			t.Errorf("received %d datagrams, want the queue bound 3", got)
		}
	})
}

func TestPacketPartitionAndDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 20*time.Millisecond)
		a := listenPacket(t, nw, hostA+":1")
		b := listenPacket(t, nw, hostB+":1")
		// In flight when the partition starts: dropped too.
		if _, err := a.WriteTo([]byte("x"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		nw.Partition(hostA, hostB)
		if _, err := a.WriteTo([]byte("y"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = b.SetReadDeadline(start.Add(time.Second))
		_, _, err := b.ReadFrom(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read across partition: %v, want deadline exceeded", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("timed out after %v", d)
		}
		nw.HealAll()
		_ = b.SetReadDeadline(time.Time{})
		if _, err := a.WriteTo([]byte("z"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, _, err := b.ReadFrom(buf); err != nil || buf[0] != 'z' {
			t.Fatalf("after heal: %q, %v", buf, err)
		}
		_ = a.Close()
		if _, err := a.WriteTo([]byte("z"), b.LocalAddr()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("write on closed conn: %v", err)
		}
		if _, err := b.WriteTo(make([]byte, 70000), a.LocalAddr()); !errors.Is(err, ErrTooLarge) {
			t.Errorf("oversized datagram: %v", err)
		}
	})
}
