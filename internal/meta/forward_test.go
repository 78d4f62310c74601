package meta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	res := fsm.Result{Index: 7, Error: &fsm.Error{Code: fsm.CodeConflict, Field: "expect_version", Reason: "at 3"}}
	if err := writeFrame(&buf, response{Result: &res, Leader: "10.0.0.1:7950"}); err != nil {
		t.Fatal(err)
	}
	var got response
	if err := readFrame(&buf, &got); err != nil {
		t.Fatal(err)
	}
	if got.Leader != "10.0.0.1:7950" || got.Result == nil || !errors.Is(got.Result.Err(), fsm.ErrConflict) {
		t.Fatalf("got %+v", got)
	}
	// A frame announcing more than it carries, or more than the limit.
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 100)
	if err := readFrame(bytes.NewReader(append(hdr[:], "{}"...)), &got); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short frame: %v", err)
	}
	binary.BigEndian.PutUint32(hdr[:], maxFrame+1)
	if err := readFrame(bytes.NewReader(hdr[:]), &got); err == nil {
		t.Error("oversized frame accepted")
	}
}

// FuzzReadFrame: the forwarded-request decoder never panics and never
// accepts more than maxFrame bytes.
func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	_ = writeFrame(&buf, request{Op: opPropose, Cmd: []byte(`{"v":1,"op":"remove_node","node_id":"a"}`), TimeoutMS: 5000})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var req request
		r := bytes.NewReader(b)
		if err := readFrame(r, &req); err != nil {
			return
		}
		if consumed := len(b) - r.Len(); consumed > maxFrame+4 {
			t.Fatalf("accepted a %d-byte frame", consumed)
		}
		var resp response
		_ = readFrame(bytes.NewReader(b), &resp)
	})
}

// forwardCluster starts voters n1..n3 and a non-voter n4 whose dials are
// counted: a non-voter dials only to forward (Raft's leader dials it), so
// after Join its count is the forward path's dials.
func forwardCluster(t *testing.T) (*cluster, *Meta, *atomic.Int64) {
	c := newCluster(t, 4*time.Millisecond)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.open(id, true, voters("n1", "n2", "n3"))
	}
	c.leader()
	var dials atomic.Int64
	c.tune = func(cfg *Config) {
		if cfg.NodeID != "n4" {
			return
		}
		dial := cfg.Dial
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, addr)
		}
	}
	edge := c.open("n4", false, nil)
	if err := edge.Join(ctxFor(t, 10*time.Second), []string{addr("n1")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "n4 knows the leader", func() bool { _, a := edge.Leader(); return a != "" })
	// The catch-up at start forwards a read_index: let it end, and drop
	// its connection, so the counts are the test's requests'.
	if err := edge.WaitCaughtUp(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	edge.fwd.reset(false)
	dials.Store(0)
	return c, edge, &dials
}

func proposeN(t *testing.T, m *Meta, n int) {
	t.Helper()
	for i := range n {
		if _, err := m.Propose(ctxFor(t, 10*time.Second), registerCmd(fmt.Sprintf("x%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestForwardReusesItsConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, edge, dials := forwardCluster(t)
		proposeN(t, edge, 10)
		if n := dials.Load(); n != 1 {
			t.Errorf("10 forwarded proposals dialed %d connections, want 1", n)
		}
		if n := edge.fwd.size(); n != 1 {
			t.Errorf("%d idle connections, want 1", n)
		}
	})
}

func TestForwardRedialsABrokenConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, edge, dials := forwardCluster(t)
		proposeN(t, edge, 1)
		edge.fwd.mu.Lock()
		_ = edge.fwd.idle[0].raw.Close() // broken under the pool's feet
		edge.fwd.mu.Unlock()
		proposeN(t, edge, 2)
		if n := dials.Load(); n != 2 {
			t.Errorf("dialed %d connections, want 2 (the first, then one after the break)", n)
		}
	})
}

func TestForwardConcurrentRequestsShareThePool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, edge, dials := forwardCluster(t)
		round := func(r int) {
			var wg sync.WaitGroup
			errs := make(chan error, maxIdleForward)
			for i := range maxIdleForward {
				wg.Go(func() {
					_, err := edge.Propose(ctxFor(t, 10*time.Second), registerCmd(fmt.Sprintf("r%d-%d", r, i)))
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		round(0)
		first := dials.Load()
		if first < 2 || first > maxIdleForward {
			t.Errorf("%d concurrent forwards dialed %d connections", maxIdleForward, first)
		}
		round(1)
		round(2)
		if n := dials.Load(); n != first {
			t.Errorf("later rounds dialed %d more connections, want 0", n-first)
		}
		if n := edge.fwd.size(); n != int(first) {
			t.Errorf("%d idle connections, want %d", n, first)
		}
		waitFor(t, 10*time.Second, "every proposal applied", func() bool { return len(edge.State().Nodes()) == 3*maxIdleForward })
	})
}

func TestForwardPoolDroppedOnLeaderChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, edge, dials := forwardCluster(t)
		proposeN(t, edge, 1)
		old := c.leader().ID()
		c.close(old)
		lead := c.leader()
		waitFor(t, 10*time.Second, "n4 follows the new leader", func() bool { id, _ := edge.Leader(); return id == lead.ID() })
		if n := edge.fwd.size(); n != 0 {
			t.Errorf("%d idle connections to the old leader kept", n)
		}
		proposeN(t, edge, 3)
		if n := dials.Load(); n != 2 {
			t.Errorf("dialed %d connections, want 2", n)
		}
		_ = edge.Close()
		if n := edge.fwd.size(); n != 0 {
			t.Errorf("%d idle connections after Close", n)
		}
	})
}

// TestForwardDeadlineOnAKeptConnection: a request on a kept connection to
// a leader that stops answering ends at its context's deadline as an
// unknown outcome, and the connection is not used again.
func TestForwardDeadlineOnAKeptConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 2 * time.Millisecond})
		defer nw.Close()
		ln, err := nw.Listen("10.0.0.1:7950")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		// A leader that answers the first request of each connection and
		// then reads requests without answering.
		var served sync.WaitGroup
		served.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				served.Go(func() {
					defer c.Close()
					var kind [1]byte
					if _, err := io.ReadFull(c, kind[:]); err != nil || kind[0] != kindForward {
						return
					}
					for i := 0; ; i++ {
						var req request
						if err := readFrame(c, &req); err != nil {
							return
						}
						if i == 0 {
							if err := writeFrame(c, response{}); err != nil {
								return
							}
						}
					}
				})
			}
		})
		var dials atomic.Int64
		dial := nw.DialFrom("10.0.0.2")
		m := &Meta{cfg: Config{Dial: func(ctx context.Context, a string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, a)
		}}}
		req := request{Op: opPropose, Cmd: []byte(`{}`)}
		if _, err := m.forward(ctxFor(t, time.Second), "10.0.0.1:7950", req); err != nil {
			t.Fatal(err)
		}
		if m.fwd.size() != 1 {
			t.Fatalf("%d idle connections after an answered request, want 1", m.fwd.size())
		}
		start := time.Now()
		_, err = m.forward(ctxFor(t, 100*time.Millisecond), "10.0.0.1:7950", req)
		if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("unanswered request: %v, want an unknown outcome", err)
		}
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Errorf("unanswered request ended after %v, want its deadline (100ms)", took)
		}
		if m.fwd.size() != 0 || dials.Load() != 1 {
			t.Fatalf("after the timeout: %d idle, %d dials; want 0 and 1", m.fwd.size(), dials.Load())
		}
		if _, err := m.forward(ctxFor(t, time.Second), "10.0.0.1:7950", req); err != nil {
			t.Fatal(err)
		}
		if dials.Load() != 2 {
			t.Errorf("%d dials, want 2 (a new connection after the timed-out one)", dials.Load())
		}
		m.fwd.reset(true)
		_ = ln.Close()
		served.Wait()
	})
}

// A kept connection whose other end closed while it sat idle (the leader
// stopped or restarted) is not used: a request sent on it would come back
// with an unknown outcome instead of being retried on a new connection.
func TestForwardPoolSkipsConnectionsClosedByThePeer(t *testing.T) {
	live, liveFar := net.Pipe()
	dead, deadFar := net.Pipe()
	t.Cleanup(func() { _ = live.Close(); _ = liveFar.Close(); _ = dead.Close() })
	if !open(&fwdConn{raw: live, sec: live}) {
		t.Fatal("an idle connection whose peer is there was taken for closed")
	}
	_ = deadFar.Close()
	if open(&fwdConn{raw: dead, sec: dead}) {
		t.Fatal("a connection its peer closed was taken for open")
	}
	var p forwardPool
	now := time.Now()
	p.put("", &fwdConn{raw: live, sec: live}, now)
	p.put("", &fwdConn{raw: dead, sec: dead}, now) // most recently used: tried first
	if c := p.get("", now); c == nil || c.raw != live {
		t.Fatalf("get returned %v, want the open connection", c)
	}
	if n := p.size(); n != 0 {
		t.Fatalf("%d idle connections left, want 0", n)
	}
}

// On a socket the probe asks the kernel: a read with a passed deadline
// would answer a timeout before looking.
func TestForwardPoolProbesSockets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	far, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if !open(&fwdConn{raw: c, sec: c}) {
		t.Fatal("an idle TCP connection whose peer is there was taken for closed")
	}
	_ = far.Close()
	// On loopback the peer's FIN is queued on this socket before Close
	// returns.
	if open(&fwdConn{raw: c, sec: c}) {
		t.Fatal("a TCP connection its peer closed was taken for open")
	}
}
