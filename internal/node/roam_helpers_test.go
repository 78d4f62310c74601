package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// roamer is an MQTT 5 client with a persistent session and a list of
// nodes, as a device configured with several broker addresses: when its
// connection ends (its node drains or stops) it connects to the next node
// in the list that answers and resumes its session there.
type roamer struct {
	t      *testing.T
	id     string
	addrs  []string // HOST:PORT of each node's MQTT listener
	filter string   // subscribed at the first connection ("": a publisher)
	onMsg  func(payload string)

	mu struct {
		sync.Mutex
		cur         *mqttclient.Client
		at          int      // index in addrs of cur
		hops        []string // "node A -> node B (why)"
		sessionLost int      // reconnections that found no session
	}
}

// connect connects to the first node that answers, trying addrs from
// index from onwards, round robin, until ctx ends.
func (r *roamer) connect(ctx context.Context, from int, resume bool) (*mqttclient.Client, int, error) {
	opts := mqttclient.Options{ClientID: r.id, KeepSession: resume, KeepAlive: 10 * time.Second}
	opts.Props.SetSessionExpiry(3600)
	if r.onMsg != nil {
		opts.OnPublish = func(p *packet.Publish) { r.onMsg(string(p.Payload)) }
	}
	for i := from; ; i++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		at := i % len(r.addrs)
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := mqttclient.Dial(dctx, "mqtt://"+r.addrs[at], opts)
		cancel()
		if err != nil {
			if i-from >= len(r.addrs) {
				// Every node refused: one is restarting and another
				// draining. Pause, or the loop spins.
				waitCtx(ctx, 100*time.Millisecond)
			}
			continue
		}
		return c, at, nil
	}
}

// start connects for the first time (a clean session with an expiry) and
// subscribes if the roamer has a filter.
func (r *roamer) start(ctx context.Context, from int) {
	r.t.Helper()
	c, at, err := r.connect(ctx, from, false)
	if err != nil {
		r.t.Fatalf("%s: first connect: %v", r.id, err)
	}
	if r.filter != "" {
		if _, err := c.Subscribe(ctx, &packet.Subscribe{Subs: []packet.Subscription{{Filter: r.filter, QoS: 1}}}); err != nil {
			r.t.Fatalf("%s: subscribe: %v", r.id, err)
		}
	}
	r.mu.Lock()
	r.mu.cur, r.mu.at = c, at
	r.mu.Unlock()
}

// client returns the current connection.
func (r *roamer) client() *mqttclient.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.cur
}

// reconnect replaces a connection that ended by one to the next node,
// resuming the session; it records the hop.
func (r *roamer) reconnect(ctx context.Context, old *mqttclient.Client) error {
	r.mu.Lock()
	if r.mu.cur != old {
		r.mu.Unlock()
		return nil // another goroutine reconnected already
	}
	from := r.mu.at
	r.mu.Unlock()
	why := "closed"
	var re *mqttclient.ReasonError
	if err := old.Err(); errors.As(err, &re) {
		why = re.Code.String()
	} else if err != nil {
		why = err.Error()
	}
	_ = old.Close()
	c, at, err := r.connect(ctx, from+1, true)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.cur, r.mu.at = c, at
	r.mu.hops = append(r.mu.hops, fmt.Sprintf("%s -> %s (%s)", r.addrs[from], r.addrs[at], why))
	if !c.Server().SessionPresent {
		r.mu.sessionLost++
	}
	return nil
}

// follow keeps a subscriber connected until ctx ends.
func (r *roamer) follow(ctx context.Context) {
	for {
		c := r.client()
		select {
		case <-ctx.Done():
			_ = c.Close()
			return
		case <-c.Done():
		}
		if err := r.reconnect(ctx, c); err != nil {
			return
		}
	}
}

// publish sends one QoS 1 message and returns once it is acknowledged,
// reconnecting (and sending it again) as often as needed.
func (r *roamer) publish(ctx context.Context, topic, payload string) error {
	for {
		c := r.client()
		err := c.Publish(ctx, &packet.Publish{Topic: topic, QoS: 1, Payload: []byte(payload)})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, mqttclient.ErrRefused) && !errors.Is(err, mqttclient.ErrConnectionLost) {
			return fmt.Errorf("%s: publish refused: %w", r.id, err)
		}
		select {
		case <-c.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := r.reconnect(ctx, c); err != nil {
			return err
		}
	}
}

func (r *roamer) close() {
	if c := r.client(); c != nil {
		_ = c.Close()
	}
}

func (r *roamer) summary() (hops []string, sessionLost int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.mu.hops...), r.mu.sessionLost
}

// waitCtx waits d or until ctx ends (pacing between refused attempts; not
// a synchronisation).
func waitCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// inbox collects what a subscriber received: the first arrival of each
// payload and the longest pause between first arrivals.
type inbox struct {
	mu struct {
		sync.Mutex
		got     map[string]time.Time
		dups    int
		last    time.Time
		longest time.Duration
		around  time.Time // when the longest pause ended
	}
}

func newInbox() *inbox {
	in := &inbox{}
	in.mu.got = map[string]time.Time{}
	return in
}

func (in *inbox) add(payload string) {
	now := time.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, seen := in.mu.got[payload]; seen {
		in.mu.dups++
		return
	}
	in.mu.got[payload] = now
	if !in.mu.last.IsZero() && now.Sub(in.mu.last) > in.mu.longest {
		in.mu.longest, in.mu.around = now.Sub(in.mu.last), now
	}
	in.mu.last = now
}

// missing returns the payloads of want not received.
func (in *inbox) missing(want []string) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for _, p := range want {
		if _, ok := in.mu.got[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

func (in *inbox) gap() (time.Duration, time.Time, int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.longest, in.mu.around, in.mu.dups
}

// acked is the list of acknowledged payloads of one publisher, and its
// longest wait between two acknowledgements.
type acked struct {
	mu struct {
		sync.Mutex
		payloads []string
		last     time.Time
		longest  time.Duration
	}
}

func (a *acked) add(p string) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mu.payloads = append(a.mu.payloads, p)
	if !a.mu.last.IsZero() && now.Sub(a.mu.last) > a.mu.longest {
		a.mu.longest = now.Sub(a.mu.last)
	}
	a.mu.last = now
}

func (a *acked) list() ([]string, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.mu.payloads...), a.mu.longest
}

// shortList prints at most a few items.
func shortList(s []string) string {
	if len(s) > 10 {
		return strings.Join(s[:10], ", ") + fmt.Sprintf(" ... (%d in all)", len(s))
	}
	return strings.Join(s, ", ")
}
