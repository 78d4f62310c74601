package cluster

import (
	"context"
	"time"

	"github.com/sextantmq/sextant/internal/run"
)

// probeInterval is how often each peer link's round trip is measured, and
// probeTimeout how long one probe may take before it is left unmeasured.
const (
	probeInterval = 5 * time.Second
	probeTimeout  = 2 * time.Second
)

// probeLoop measures the application-level round trip of every connected
// peer link with an empty request, for the admin API's measured RTTs (the
// estimates come from Vivaldi coordinates). It includes queueing on the
// link, which is what a forwarded message sees.
func (l *Layer) probeLoop(ctx context.Context) {
	run.Every(ctx, l.clock, probeInterval, probeInterval, l.probe)
}

// probe measures every connected link once.
func (l *Layer) probe(ctx context.Context) {
	for _, pl := range l.peers.Links() {
		if !pl.Up() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		start := l.clock.Now()
		_, err := pl.Call(pctx, methodPing, nil)
		rtt := l.clock.Now().Sub(start)
		cancel()
		if err != nil {
			continue
		}
		l.rtt.Lock()
		if old, ok := l.rtt.m[pl.Node()]; ok {
			rtt = old + (rtt-old)/4
		}
		l.rtt.m[pl.Node()] = rtt
		l.rtt.Unlock()
	}
}

// MeasuredRTT returns the smoothed measured round trip to each peer whose
// link answered a probe.
func (l *Layer) MeasuredRTT() map[string]time.Duration {
	l.rtt.Lock()
	defer l.rtt.Unlock()
	out := make(map[string]time.Duration, len(l.rtt.m))
	for k, v := range l.rtt.m {
		out[k] = v
	}
	return out
}
