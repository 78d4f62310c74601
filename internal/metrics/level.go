package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Level is a gauge of a whole count that the delivery path moves by one per
// message (messages queued, messages in flight). A prometheus.Gauge keeps
// a float64 and changes it with a compare-and-swap loop; a fan-out to 1,000
// subscribers paid that twice per delivery. Level is one atomic add, read
// as a float only when scraped.
type Level struct {
	v atomic.Int64
	prometheus.GaugeFunc
}

// Inc adds one.
func (l *Level) Inc() { l.v.Add(1) }

// Dec subtracts one.
func (l *Level) Dec() { l.v.Add(-1) }

// Add adds n (negative: subtracts).
func (l *Level) Add(n int64) { l.v.Add(n) }

// Load returns the current count.
func (l *Level) Load() int64 { return l.v.Load() }

func (f factory) level(name, help string) *Level {
	l := &Level{}
	l.GaugeFunc = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(l.v.Load()) })
	f.r.MustRegister(l.GaugeFunc)
	return l
}
