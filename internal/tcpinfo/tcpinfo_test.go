package tcpinfo

import (
	"io"
	"net"
	"runtime"
	"testing"
)

func TestRTTOfLoopbackTCP(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_INFO is read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4)
	c.Write([]byte("ping"))
	io.ReadFull(c, buf)
	rtt, ok := RTT(c)
	if !ok || rtt <= 0 {
		t.Fatalf("RTT = %v, %v; want a positive kernel estimate", rtt, ok)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := RTT(a); ok {
		t.Fatal("an in-memory pipe reported an RTT")
	}
}
