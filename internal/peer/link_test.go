package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/netx"
)

// recorder is a Handler that records what it receives.
type recorder struct {
	node string
	mu   sync.Mutex
	ups  int
	down int
	// interest per peer as announced
	interest map[string]map[string]bool
	fulls    int
	pubs     []string // "direct|groups|msg"
	retained []string
	gate     chan struct{} // if set, Publish waits for a receive on it
	sync     [][]byte      // sent with SyncRetained on LinkUp
	serve    func(ctx context.Context, method byte, body []byte) ([]byte, error)
}

var _ Handler = (*recorder)(nil)

func newRecorder(node string) *recorder {
	return &recorder{node: node, interest: map[string]map[string]bool{}}
}

func (r *recorder) LinkUp(l *Link) {
	r.mu.Lock()
	r.ups++
	s := r.sync
	r.mu.Unlock()
	if s != nil {
		l.SyncRetained(slices.Clone(s))
	}
}

func (r *recorder) LinkDown(string) {
	r.mu.Lock()
	r.down++
	r.mu.Unlock()
}

func (r *recorder) Interest(node string, full bool, add, remove []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.interest[node]
	if full || set == nil {
		set = map[string]bool{}
		r.interest[node] = set
	}
	if full {
		r.fulls++
	}
	for _, f := range add {
		set[f] = true
	}
	for _, f := range remove {
		delete(set, f)
	}
}

func (r *recorder) Publish(node string, msg []byte, direct bool, groups []string) {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	r.pubs = append(r.pubs, fmt.Sprintf("%v|%v|%s", direct, groups, msg))
	r.mu.Unlock()
}

func (r *recorder) Retained(node string, msg []byte) {
	r.mu.Lock()
	r.retained = append(r.retained, string(msg))
	r.mu.Unlock()
}

func (r *recorder) Serve(ctx context.Context, node string, method byte, body []byte) ([]byte, error) {
	r.mu.Lock()
	serve := r.serve
	r.mu.Unlock()
	if serve != nil {
		return serve(ctx, method, body)
	}
	return append([]byte(node+":"), body...), nil
}

func (r *recorder) setServe(f func(ctx context.Context, method byte, body []byte) ([]byte, error)) {
	r.mu.Lock()
	r.serve = f
	r.mu.Unlock()
}

func (r *recorder) snapshot() (pubs, retained []string, interest map[string]map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	interest = map[string]map[string]bool{}
	for k, v := range r.interest {
		interest[k] = maps(v)
	}
	return slices.Clone(r.pubs), slices.Clone(r.retained), interest
}

func maps(m map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

type testNode struct {
	id  string
	mgr *Manager
	rec *recorder
	reg *prometheus.Registry
}

// startNode runs a manager for id on host:7000 of nw.
func startNode(t *testing.T, nw *memnet.Network, id, host string, opts Options, rec *recorder) *testNode {
	t.Helper()
	return startNodeWith(t, nw, id, host, opts, rec, nil)
}

// startNodeWith is startNode with a round-trip estimate.
func startNodeWith(t *testing.T, nw *memnet.Network, id, host string, opts Options, rec *recorder,
	estimate func(a, b string) (time.Duration, bool)) *testNode {
	t.Helper()
	ln, err := nw.Listen(host + ":7000")
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil {
		rec = newRecorder(id)
	}
	reg := prometheus.NewRegistry()
	m, err := New(Config{
		NodeID: id, Listener: ln, Dial: nw.DialFrom(host), Handler: rec,
		Seed: 7, Registerer: reg, Options: opts, Estimate: estimate,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	n := &testNode{id: id, mgr: m, rec: rec, reg: reg}
	t.Cleanup(func() { _ = m.Close() })
	return n
}

// eventually polls cond in the bubble's fake time.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v", what, within)
		}
		time.Sleep(10 * time.Millisecond) // lint:sleep-ok polls in a synctest bubble's fake time
	}
}

func pair(t *testing.T, nw *memnet.Network, opts Options) (a, b *testNode) {
	t.Helper()
	a = startNode(t, nw, "a", "10.0.0.1", opts, nil)
	b = startNode(t, nw, "b", "10.0.0.2", opts, nil)
	a.mgr.Add("b", "10.0.0.2:7000")
	b.mgr.Add("a", "10.0.0.1:7000")
	eventually(t, 5*time.Second, "link up", func() bool {
		return a.mgr.Link("b").Up() && b.mgr.Link("a").Up()
	})
	return a, b
}

func msgs(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func TestPublishBatchesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 20 * time.Millisecond})
		defer nw.Close()
		a := startNode(t, nw, "a", "10.0.0.1", Options{}, nil)
		b := startNode(t, nw, "b", "10.0.0.2", Options{}, nil)
		var writes countingDial
		a.mgr.cfg.Dial = writes.wrap(nw.DialFrom("10.0.0.1"))
		// b does not accept a yet: the messages wait in a's queue, and go
		// out in a few batches once b knows a.
		a.mgr.Add("b", "10.0.0.2:7000")
		want := msgs(2000, "m")
		for i, m := range want {
			a.mgr.Publish("b", &Publish{Msg: []byte(m), QoS: byte(i % 3), Direct: i%2 == 0, Groups: groupsFor(i)})
		}
		b.mgr.Add("a", "10.0.0.1:7000")
		eventually(t, 10*time.Second, "all delivered", func() bool {
			p, _, _ := b.rec.snapshot()
			return len(p) == len(want)
		})
		got, _, _ := b.rec.snapshot()
		for i, m := range want {
			if exp := fmt.Sprintf("%v|%v|%s", i%2 == 0, groupsFor(i), m); got[i] != exp {
				t.Fatalf("message %d: got %q, want %q", i, got[i], exp)
			}
		}
		// 2000 messages in one burst: a handful of writes, not one each.
		if w := writes.n.Load(); w > 10 {
			t.Errorf("%d writes for 2000 messages", w)
		} else {
			t.Logf("%d writes for 2000 messages", w)
		}
		if sent := testutil.ToFloat64(a.mgr.metrics.sentMessages.WithLabelValues("b")); sent != 2000 {
			t.Errorf("sent counter %v, want 2000", sent)
		}
		if recv := testutil.ToFloat64(b.mgr.metrics.recvMessages.WithLabelValues("a")); recv != 2000 {
			t.Errorf("received counter %v, want 2000", recv)
		}
	})
}

func groupsFor(i int) []string {
	if i%5 == 0 {
		return []string{"$share/g/x", "$share/h/#"}
	}
	return nil
}

func TestInterestSnapshotThenDeltasAndResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond, BreakAfter: time.Second})
		defer nw.Close()
		a := startNode(t, nw, "a", "10.0.0.1", Options{}, nil)
		a.mgr.AddInterest("x/#", 1)
		a.mgr.AddInterest("$share/g/y", 1)
		b := startNode(t, nw, "b", "10.0.0.2", Options{}, nil)
		a.mgr.Add("b", "10.0.0.2:7000")
		b.mgr.Add("a", "10.0.0.1:7000")
		interestOf := func() map[string]bool {
			_, _, in := b.rec.snapshot()
			return in["a"]
		}
		same := func(want ...string) func() bool {
			return func() bool {
				got := interestOf()
				if len(got) != len(want) {
					return false
				}
				for _, w := range want {
					if !got[w] {
						return false
					}
				}
				return true
			}
		}
		eventually(t, 5*time.Second, "snapshot", same("x/#", "$share/g/y"))

		// Reference counting: a second +1 then one -1 keeps the filter.
		a.mgr.AddInterest("x/#", 1)
		a.mgr.AddInterest("x/#", -1)
		a.mgr.AddInterest("z", 1)
		// Reports racing out of order: -1 before its +1.
		a.mgr.AddInterest("w", -1)
		a.mgr.AddInterest("w", 1)
		eventually(t, 5*time.Second, "deltas", same("x/#", "$share/g/y", "z"))
		b.rec.mu.Lock()
		fulls := b.rec.fulls
		b.rec.mu.Unlock()
		if fulls != 1 {
			t.Fatalf("%d snapshots before any reconnection, want 1", fulls)
		}

		// Cut the link long enough for it to break; change interest while it
		// is down; after healing, a new snapshot brings b up to date.
		nw.Partition("10.0.0.1", "10.0.0.2")
		eventually(t, 30*time.Second, "link down", func() bool { return !a.mgr.Link("b").Up() })
		a.mgr.AddInterest("$share/g/y", -1)
		a.mgr.AddInterest("q/+", 1)
		nw.Heal("10.0.0.1", "10.0.0.2")
		eventually(t, 30*time.Second, "resync", same("x/#", "z", "q/+"))
		b.rec.mu.Lock()
		fulls = b.rec.fulls
		b.rec.mu.Unlock()
		if fulls != 2 {
			t.Fatalf("%d snapshots after one reconnection, want 2", fulls)
		}
		if r := testutil.ToFloat64(a.mgr.metrics.reconnects.WithLabelValues("b")); r != 1 {
			t.Errorf("a counted %v reconnects, want 1", r)
		}
	})
}

func TestInterestLogTruncationSendsSnapshot(t *testing.T) {
	in := newInterest()
	f, ok := in.since(0, true)
	if !ok || !f.Full || f.To != 0 || len(f.Add) != 0 {
		t.Fatalf("first: %+v %v", f, ok)
	}
	if _, ok := in.since(0, false); ok {
		t.Fatal("nothing changed, but since reported a change")
	}
	in.add("a", 1)
	f, _ = in.since(0, false)
	if f.Full || f.From != 0 || f.To != 1 || !slices.Equal(f.Add, []string{"a"}) {
		t.Fatalf("delta: %+v", f)
	}
	for i := range 2*interestLog + 10 {
		in.add("f"+strconv.Itoa(i), 1)
	}
	f, _ = in.since(1, false)
	if !f.Full || len(f.Add) != 2*interestLog+11 {
		t.Fatalf("after the log was truncated: full=%v with %d filters", f.Full, len(f.Add))
	}
	v := in.version()
	in.add("f0", -1)
	f, _ = in.since(v, false)
	if f.Full || !slices.Equal(f.Remove, []string{"f0"}) || f.From != v || f.To != v+1 {
		t.Fatalf("recent delta: %+v", f)
	}
	// A filter added and removed again nets out as a removal.
	in.add("tmp", 1)
	in.add("tmp", -1)
	f, _ = in.since(v+1, false)
	if len(f.Add) != 0 || !slices.Equal(f.Remove, []string{"tmp"}) {
		t.Fatalf("net delta: %+v", f)
	}
	var r remoteInterest
	if r.apply(interestFrame{From: 3, To: 4}) {
		t.Error("a delta before any snapshot was accepted")
	}
	r.apply(interestFrame{Full: true, To: 4})
	if r.apply(interestFrame{From: 5, To: 6}) {
		t.Error("a delta with a gap was accepted")
	}
	if !r.apply(interestFrame{From: 4, To: 6}) {
		t.Error("a following delta was refused")
	}
}

func TestCallNotifyAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond})
		defer nw.Close()
		a, b := pair(t, nw, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := a.mgr.Link("b").Call(ctx, 1, []byte("ping"))
		if err != nil || string(got) != "a:ping" {
			t.Fatalf("call a->b: %q, %v", got, err)
		}
		got, err = b.mgr.Link("a").Call(ctx, 1, []byte("pong"))
		if err != nil || string(got) != "b:pong" {
			t.Fatalf("call b->a: %q, %v", got, err)
		}

		notified := make(chan string, 1)
		release := make(chan struct{})
		b.rec.setServe(func(ctx context.Context, method byte, body []byte) ([]byte, error) {
			switch method {
			case 2:
				return nil, errors.New("no such session")
			case 3:
				notified <- string(body)
				return nil, nil
			case 4:
				select {
				case <-release:
				case <-ctx.Done():
				}
				return []byte("late"), nil
			}
			return body, nil
		})
		if _, err := a.mgr.Link("b").Call(ctx, 2, nil); !errors.Is(err, ErrRemote) {
			t.Fatalf("handler error: %v, want ErrRemote", err)
		}
		if !a.mgr.Link("b").Notify(3, []byte("note")) {
			t.Fatal("notify not queued")
		}
		if n := <-notified; n != "note" {
			t.Fatalf("notification %q", n)
		}
		short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
		if _, err := a.mgr.Link("b").Call(short, 4, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("slow handler: %v, want deadline exceeded", err)
		}
		cancelShort()
		close(release)

		// A call whose connection dies before the answer fails with ErrLinkDown.
		b.rec.setServe(func(ctx context.Context, method byte, body []byte) ([]byte, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		errc := make(chan error, 1)
		go func() {
			_, err := a.mgr.Link("b").Call(ctx, 5, nil)
			errc <- err
		}()
		synctest.Wait()
		_ = b.mgr.Close()
		if err := <-errc; !errors.Is(err, ErrLinkDown) {
			t.Fatalf("call across a closing peer: %v, want ErrLinkDown", err)
		}
	})
}

func TestQueueOverflowPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 10 * time.Millisecond, StreamBuffer: 4096})
		defer nw.Close()
		opts := Options{QueueMessages: 8, BlockTimeout: 500 * time.Millisecond, BatchBytes: 256}
		a := startNode(t, nw, "a", "10.0.0.1", opts, nil)
		rb := newRecorder("b")
		rb.gate = make(chan struct{})
		b := startNode(t, nw, "b", "10.0.0.2", opts, rb)
		a.mgr.Add("b", "10.0.0.2:7000")
		// b's link to a is added below, once the queue is filled while down.
		l := a.mgr.Link("b")
		drops := func(reason string) float64 { return testutil.ToFloat64(l.lm.dropped[reason]) }

		// Link down (b does not know a yet, so it refuses): QoS 0 fills the
		// queue, then evicts oldest first; QoS 1 evicts QoS 0 while there
		// is some, then is dropped at once.
		for i := range 10 {
			l.Publish(&Publish{Msg: []byte("q0-" + strconv.Itoa(i))})
		}
		if d := drops(DropQueueFull); d != 2 {
			t.Fatalf("queue_full drops %v, want 2", d)
		}
		for i := range 9 {
			l.Publish(&Publish{Msg: []byte("q1-" + strconv.Itoa(i)), QoS: 1})
		}
		if d := drops(DropQueueFull); d != 10 {
			t.Fatalf("queue_full drops %v, want 10 (every QoS 0 evicted)", d)
		}
		if d := drops(DropLinkDown); d != 1 {
			t.Fatalf("link_down drops %v, want 1", d)
		}
		l.mu.Lock()
		var queued []string
		for _, p := range l.mu.out.pending.items[l.mu.out.pending.head:] {
			if p != nil {
				queued = append(queued, string(p.Msg))
			}
		}
		l.mu.Unlock()
		if want := msgs(8, "q1-"); !slices.Equal(queued, want) {
			t.Fatalf("queue holds %v, want %v", queued, want)
		}

		// Now connect; b's handler is gated, so the pipe fills up and the
		// queue with it: a QoS 1 publisher blocks, then drops.
		b.mgr.Add("a", "10.0.0.1:7000")
		eventually(t, 10*time.Second, "link up", l.Up)
		big := make([]byte, 1024)
		start := time.Now()
		blocked, published := 0, 0
		for i := 0; blocked == 0 && i < 1000; i++ {
			published++
			before := drops(DropBlocked)
			t0 := time.Now()
			l.Publish(&Publish{Msg: big, QoS: 1})
			if drops(DropBlocked) > before {
				blocked++
				if waited := time.Since(t0); waited != opts.BlockTimeout {
					t.Fatalf("QoS 1 publisher waited %v before the drop, want %v", waited, opts.BlockTimeout)
				}
			}
		}
		if blocked == 0 {
			t.Fatal("no QoS 1 publish was ever blocked and dropped")
		}
		t.Logf("first blocked drop after %v", time.Since(start))
		// Release b: everything queued arrives, in order, nothing more lost.
		close(rb.gate)
		want := len(queued) + published - blocked
		eventually(t, 30*time.Second, "everything delivered", func() bool {
			p, _, _ := rb.snapshot()
			return len(p) == want
		})
		got, _, _ := rb.snapshot()
		for i, q := range queued {
			if exp := fmt.Sprintf("false|[]|%s", q); got[i] != exp {
				t.Fatalf("delivery %d: %q, want %q", i, got[i], exp)
			}
		}
		if d := drops(DropBlocked); d != 1 {
			t.Fatalf("blocked_timeout drops %v, want 1", d)
		}
	})
}

// countingDial wraps a dial function and counts the writes on its
// connections.
type countingDial struct{ n atomic.Int64 }

func (c *countingDial) wrap(dial netx.DialFunc) netx.DialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, n: &c.n}, nil
	}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}
