package router

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// The benchmark index models a device fleet: about 90% exact subscriptions
// ("devices/<id>/telemetry", each device's backend consumer), about 10%
// wildcard subscriptions spread over the tree, and some shared groups.

type benchClient struct{ id int }

type benchSub struct {
	c      *benchClient
	filter string
	o      Options
}

const benchDevices = 1_000_000

// benchWorkload returns n subscriptions over n/4 distinct clients.
func benchWorkload(n int, seed uint64) []benchSub {
	r := rand.New(rand.NewPCG(seed, 0))
	clients := make([]*benchClient, max(1, n/4))
	for i := range clients {
		clients[i] = &benchClient{i}
	}
	client := func() *benchClient { return clients[r.IntN(len(clients))] }
	dev := func() string { return strconv.Itoa(r.IntN(benchDevices)) }
	subs := make([]benchSub, 0, n)
	for i := 0; len(subs) < n; i++ {
		var f string
		o := Options{QoS: byte(r.IntN(3))}
		switch p := r.IntN(1000); {
		case p < 900:
			f = "devices/" + strconv.Itoa(i%benchDevices) + "/telemetry"
		case p < 940:
			f = "devices/" + dev() + "/#"
		case p < 970:
			f = "devices/" + dev() + "/+"
		case p < 985:
			f = "region/" + strconv.Itoa(r.IntN(1000)) + "/+/telemetry"
			o.ID = uint32(1 + r.IntN(100))
		case p < 995:
			f = "+/" + dev() + "/alerts"
		default:
			f = "$share/workers" + strconv.Itoa(r.IntN(100)) + "/region/" + strconv.Itoa(r.IntN(1000)) + "/#"
		}
		subs = append(subs, benchSub{client(), f, o})
	}
	return subs
}

// benchIndex builds the 1,000,000-subscription index once per test binary.
var benchIndex = sync.OnceValue(func() *Index[*benchClient] {
	ix := New[*benchClient]()
	for _, s := range benchWorkload(1_000_000, 1) {
		if _, err := ix.Subscribe(s.c, s.filter, s.o); err != nil {
			panic(err)
		}
	}
	return ix
})

func benchNames(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	names := make([]string, n)
	for i := range names {
		switch p := r.IntN(10); {
		case p < 8:
			names[i] = "devices/" + strconv.Itoa(r.IntN(benchDevices)) + "/telemetry"
		case p < 9:
			names[i] = "region/" + strconv.Itoa(r.IntN(1000)) + "/" + strconv.Itoa(r.IntN(benchDevices)) + "/telemetry"
		default:
			names[i] = "devices/" + strconv.Itoa(r.IntN(benchDevices)) + "/alerts"
		}
	}
	return names
}

func BenchmarkMatch1M(b *testing.B) {
	ix := benchIndex()
	names := benchNames(1<<14, 2)
	from := &benchClient{-1}
	var m Matches[*benchClient]
	deliveries := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ix.Match(names[i&(len(names)-1)], from, &m)
		deliveries += len(m.Direct) + len(m.Shared)
	}
	b.ReportMetric(float64(deliveries)/float64(b.N), "matches/op")
}

func BenchmarkMatch1MParallel(b *testing.B) {
	ix := benchIndex()
	names := benchNames(1<<14, 3)
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var m Matches[*benchClient]
		// Each goroutine starts elsewhere in names, so that one does not
		// warm the cache for another.
		for i := int(worker.Add(1)) * 4099; pb.Next(); i++ {
			ix.Match(names[i&(len(names)-1)], nil, &m)
		}
	})
}

// BenchmarkChurn subscribes and unsubscribes a filter on the 1M index: the
// cost of a client connecting and leaving with one subscription.
func BenchmarkChurn1M(b *testing.B) {
	ix := benchIndex()
	subs := benchWorkload(1<<14, 4)
	for i := range subs {
		subs[i].filter = "churn/" + strconv.Itoa(i) + "/" + subs[i].filter
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s := subs[i&(len(subs)-1)]
		if _, err := ix.Subscribe(s.c, s.filter, s.o); err != nil {
			b.Fatal(err)
		}
		ix.Unsubscribe(s.c, s.filter)
	}
}

// BenchmarkMemoryPerSubscription reports the heap the index holds per
// subscription, not counting the filter strings the caller passed in.
func BenchmarkMemoryPerSubscription(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			subs := benchWorkload(n, 5)
			var ix *Index[*benchClient]
			var before, after runtime.MemStats
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&before)
				ix = New[*benchClient]()
				for _, s := range subs {
					ix.Subscribe(s.c, s.filter, s.o)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
			}
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(ix.Len()), "bytes/sub")
			b.ReportMetric(float64(ix.nodes)/float64(ix.Len()), "nodes/sub")
			runtime.KeepAlive(ix)
			runtime.KeepAlive(subs)
		})
	}
}
