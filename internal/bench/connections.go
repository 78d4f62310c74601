package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// connections opens cfg.Conns idle connections, each with one subscription
// to its own topic, holds them for cfg.Hold, and reports the broker's memory
// per connection and the connect latency. Failed connections are counted,
// not fatal; a broker that cannot be reached at all is.
func (r *runner) connections(ctx context.Context) (*Result, error) {
	c := &r.cfg
	r.setPhase("connect")
	clients := make([]*mqttclient.Client, c.Conns)
	var hmu sync.Mutex
	hist := newHistogram()
	var fmu sync.Mutex
	failed := 0

	// Probe first, so an unreachable broker is one clear error.
	probe, err := mqttclient.Dial(ctx, c.URL, r.options(r.clientPrefix+"-probe"))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_ = probe.Disconnect(dctx, nil)
	cancel()

	before := r.sample()
	start := time.Now()
	_ = parallel(ctx, c.Conns, dialers, func(i int) error {
		if c.ConnectRate > 0 {
			due := start.Add(time.Duration(float64(i) / c.ConnectRate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
		}
		t0 := time.Now()
		cl, err := mqttclient.Dial(ctx, c.URL, r.options(fmt.Sprintf("%s-c%d", r.clientPrefix, i)))
		if err == nil {
			clients[i] = cl
			filter := fmt.Sprintf("%s/idle/%d", r.topicPrefix, i)
			_, err = cl.Subscribe(ctx, &packet.Subscribe{Subs: []packet.Subscription{{Filter: filter, QoS: c.QoS}}})
		}
		if err != nil {
			fmu.Lock()
			failed++
			fmu.Unlock()
			r.addError(fmt.Sprintf("connection %d", i), err)
			return nil
		}
		hmu.Lock()
		_ = hist.RecordValue(min(max(time.Since(t0).Microseconds(), latMin), latMax))
		hmu.Unlock()
		r.countConn()
		return nil
	})
	ramp := time.Since(start)

	r.setPhase("hold")
	t := time.NewTimer(c.Hold)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	after := r.sample()
	opened := 0
	for i, cl := range clients {
		if cl == nil {
			continue
		}
		if err := cl.Err(); err != nil {
			failed++
			r.addError(fmt.Sprintf("connection %d", i), err)
			continue
		}
		opened++
	}
	_ = parallel(context.Background(), len(clients), dialers, func(i int) error {
		if cl := clients[i]; cl != nil {
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = cl.Disconnect(dctx, nil)
			cancel()
		}
		return nil
	})

	res := r.header()
	res.Pubs, res.Subs, res.Topics = 0, 0, 0
	cs := &ConnStats{Target: c.Conns, Opened: opened, Failed: failed, RampSeconds: ramp.Seconds(), Connect: Summarize(hist)}
	res.Connections = cs
	r.cpu(res, before, after, 0)
	if res.Broker != nil && opened > 0 {
		cs.RSSPerConnBytes = float64(res.Broker.RSSAfterKiB-res.Broker.RSSBeforeKiB) * 1024 / float64(opened)
	}
	if c.BrokerPID == 0 {
		res.Notes = append(res.Notes, "no --broker-pid: broker memory per connection not measured")
	}
	r.finish(res)
	return res, nil
}
