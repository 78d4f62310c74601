package memnet

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestStallFreezesWithoutReset: a stalled host's streams deliver nothing
// either way for longer than BreakAfter, are not reset, and a full buffer
// blocks the writer; Resume delivers everything, in order, one one-way
// latency later. A stream opened during the stall is frozen too, and its
// same-host streams (its clients) stall with it.
func TestStallFreezesWithoutReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{BreakAfter: time.Second, StreamBuffer: 8})
		defer nw.Close()
		nw.SetRTT(hostA, hostB, 10*time.Millisecond)
		c, s := pipe(t, nw)
		ln, err := nw.Listen(hostB + ":7001")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		nw.Stall(hostB)
		if !nw.Stalled(hostB) || nw.Stalled(hostA) {
			t.Fatal("Stalled does not report the stall")
		}
		// A client on the stalled host itself (loopback) is frozen too.
		local, err := nw.Dial(context.Background(), hostB, hostB+":7001")
		if err != nil {
			t.Fatalf("dial during a stall: %v", err)
		}
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := local.Write([]byte("lo")); err != nil {
			t.Fatal(err)
		}
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			if _, err := c.Write([]byte("0123456789")); err != nil { // more than the 8-byte buffer
				t.Errorf("write to a stalled host: %v", err)
			}
		}()
		got := make(chan []byte, 2)
		go func() { got <- readN(t, s, 10) }()
		go func() { got <- readN(t, peer, 2) }()
		time.Sleep(5 * time.Second) // lint:sleep-ok fake time: far past BreakAfter
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("a stalled stream delivered %q", b)
		case <-wrote:
			t.Fatal("the writer did not block on the full buffer")
		default:
		}
		resumed := time.Now()
		nw.Resume(hostB)
		<-wrote
		a, b := <-got, <-got
		if !bytes.Equal(a, []byte("lo")) && !bytes.Equal(b, []byte("lo")) {
			t.Errorf("loopback data lost: %q %q", a, b)
		}
		if !bytes.Equal(a, []byte("0123456789")) && !bytes.Equal(b, []byte("0123456789")) {
			t.Errorf("stream data lost or reordered: %q %q", a, b)
		}
		if d := time.Since(resumed); d < 5*time.Millisecond {
			t.Errorf("delivered %v after Resume, want at least the one-way latency", d)
		}
	})
}

// TestStallHoldsDatagrams: datagrams to a stalled host wait for Resume;
// those it sends are dropped.
func TestStallHoldsDatagrams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := New(Options{})
		defer nw.Close()
		a := listenPacket(t, nw, hostA+":5000")
		b := listenPacket(t, nw, hostB+":5000")
		nw.Stall(hostB)
		if _, err := a.WriteTo([]byte("held"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.WriteTo([]byte("dropped"), a.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		_ = b.SetReadDeadline(time.Now().Add(time.Second))
		if _, _, err := b.ReadFrom(make([]byte, 8)); err == nil {
			t.Fatal("a stalled host received a datagram")
		}
		nw.Resume(hostB)
		_ = b.SetReadDeadline(time.Time{})
		buf := make([]byte, 8)
		n, _, err := b.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "held" {
			t.Fatalf("after Resume: %q, %v; want the held datagram", buf[:n], err)
		}
		_ = a.SetReadDeadline(time.Now().Add(time.Second))
		if n, _, err := a.ReadFrom(buf); err == nil {
			t.Fatalf("a datagram sent by a stalled host arrived: %q", buf[:n])
		}
	})
}
