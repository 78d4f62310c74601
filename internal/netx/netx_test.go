package netx

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// flakyListener fails its first fails Accepts with a temporary error, then
// hands out pipe ends, recording when each Accept was called.
type flakyListener struct {
	mu     sync.Mutex
	fails  int
	calls  []time.Time
	closed chan struct{}
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls = append(l.calls, time.Now())
	fail := l.fails > 0
	if fail {
		l.fails--
	}
	l.mu.Unlock()
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	if fail {
		return nil, errors.New("too many open files")
	}
	c, _ := net.Pipe()
	return c, nil
}

func (l *flakyListener) Close() error   { close(l.closed); return nil }
func (l *flakyListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestAcceptBacksOffThenServes: failed Accepts are retried after pauses
// doubling from 5 ms, a success resets the pause, and serve returning false
// ends the loop.
func TestAcceptBacksOffThenServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := &flakyListener{fails: 4, closed: make(chan struct{})}
		served := 0
		start := time.Now()
		Accept(context.Background(), ln, nil, nil, func(c net.Conn) bool {
			_ = c.Close()
			served++
			return served < 2
		})
		if served != 2 {
			t.Fatalf("served %d connections, want 2", served)
		}
		want := []time.Duration{0, 5, 15, 35, 75, 75} // cumulative ms: pauses 5, 10, 20, 40, then none
		if len(ln.calls) != len(want) {
			t.Fatalf("%d Accept calls, want %d", len(ln.calls), len(want))
		}
		for i, at := range ln.calls {
			if got := at.Sub(start); got != want[i]*time.Millisecond {
				t.Errorf("Accept %d at %v, want %v", i, got, want[i]*time.Millisecond)
			}
		}
	})
}

// TestAcceptStopsOnCloseAndContext: a closed listener ends the loop at
// once, and so does a context that ends during a pause.
func TestAcceptStopsOnCloseAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := &flakyListener{closed: make(chan struct{})}
		_ = ln.Close()
		Accept(context.Background(), ln, nil, nil, func(net.Conn) bool { t.Error("served on a closed listener"); return true })

		ln = &flakyListener{fails: 1 << 20, closed: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Hour, cancel)
		Accept(ctx, ln, nil, nil, func(net.Conn) bool { return true })
		if ctx.Err() == nil {
			t.Fatal("Accept returned before its context ended")
		}
	})
}

func TestProbeReadsTheAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err == nil {
			c.Write(append([]byte("re:"), buf...))
		}
	}()
	got, err := Probe(context.Background(), ln.Addr().String(), 5*time.Second, []byte("hello"), 5)
	if err != nil || string(got) != "re:he" {
		t.Fatalf("Probe: %q %v; want the first five bytes of the answer", got, err)
	}
	if _, err := Probe(context.Background(), "127.0.0.1:1", time.Second, nil, 1); err == nil {
		t.Fatal("a probe of a closed port succeeded")
	}
}
