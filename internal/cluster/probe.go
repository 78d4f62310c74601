package cluster

import (
	"context"
	"time"
)

// probeInterval is how often each peer link's round trip is measured.
const probeInterval = 5 * time.Second

// probeLoop measures the application-level round trip of every connected
// peer link with an empty request, for the admin API's measured RTTs (the
// estimates come from Vivaldi coordinates). It includes queueing on the
// link, which is what a forwarded message sees.
func (c *Cluster) probeLoop(ctx context.Context) {
	t := c.clock.NewTimer(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for _, l := range c.peers.Links() {
			if !l.Up() {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			start := c.clock.Now()
			_, err := l.Call(pctx, methodPing, nil)
			rtt := c.clock.Now().Sub(start)
			cancel()
			if err != nil {
				continue
			}
			c.rtt.Lock()
			if old, ok := c.rtt.m[l.Node()]; ok {
				rtt = old + (rtt-old)/4
			}
			c.rtt.m[l.Node()] = rtt
			c.rtt.Unlock()
		}
		t.Reset(probeInterval)
	}
}

// MeasuredRTT returns the smoothed measured round trip to each peer whose
// link answered a probe.
func (c *Cluster) MeasuredRTT() map[string]time.Duration {
	c.rtt.Lock()
	defer c.rtt.Unlock()
	out := make(map[string]time.Duration, len(c.rtt.m))
	for k, v := range c.rtt.m {
		out[k] = v
	}
	return out
}
