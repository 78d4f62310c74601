package listener

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/coder/websocket"
)

func echo() Handler {
	return HandlerFunc(func(c net.Conn) {
		defer c.Close()
		_, _ = io.Copy(c, c)
	})
}

func TestTCPServesAndCloseWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := ServeTCP(ln, echo(), slog.New(slog.DiscardHandler), Options{})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Fatal("dial succeeded after Close")
	}
	c.Close()
	if err := s.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestWebSocketNegotiatesMQTTSubprotocol(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := ServeWebSocket(ln, echo(), slog.New(slog.DiscardHandler), Options{})
	defer s.Close()
	ctx := context.Background()
	wc, resp, err := websocket.Dial(ctx, "ws://"+s.Addr().String()+"/mqtt", &websocket.DialOptions{Subprotocols: []string{"mqtt"}})
	if err != nil {
		t.Fatal(err)
	}
	if wc.Subprotocol() != "mqtt" {
		t.Fatalf("subprotocol %q, want mqtt (status %d)", wc.Subprotocol(), resp.StatusCode)
	}
	nc := websocket.NetConn(ctx, wc, websocket.MessageBinary)
	if _, err := nc.Write([]byte{0xC0, 0x00}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(nc, buf); err != nil || buf[0] != 0xC0 {
		t.Fatalf("echo over websocket: %v %v", buf, err)
	}
	nc.Close()

	if _, _, err := websocket.Dial(ctx, "ws://"+s.Addr().String()+"/other", nil); err == nil {
		t.Fatal("websocket accepted on a path other than /mqtt")
	}
}
