package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// replay (-mode replay) measures replay throughput from disk: it writes a
// log of -records 64-byte records on a replicas 3 topic (QoS 1, pipelined),
// restarts every node (so the log is read from its files, through the page
// cache, by a process that has not seen it), then subscribes with
// sx-from=earliest through a node other than the home and times the
// records' arrival.
func replay(ns []*node) {
	check(setPolicy(ns[0], `{"rules":[{"match":"replay/#","mode":"sequenced","replicas":3}]}`))
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const topic = "replay/log"
	pub, err := mqttclient.Dial(ctx, ns[0].mqtt(), mqttclient.Options{ClientID: "replay-pub", KeepAlive: time.Minute, MaxInflight: 1000})
	check(err)
	payload := make([]byte, 64)
	start := time.Now()
	var failed atomic.Int64
	done := make(chan struct{}, *records)
	for range *records {
		check(pub.PublishAsync(ctx, &packet.Publish{Topic: topic, QoS: 1, Payload: payload}, func(err error) {
			if err != nil {
				failed.Add(1)
			}
			done <- struct{}{}
		}))
	}
	for range *records {
		<-done
	}
	_ = pub.Close()
	w := time.Since(start)
	fmt.Printf("wrote %d records in %.1f s (%.0f/s), %d failed\n", *records, w.Seconds(), float64(*records)/w.Seconds(), failed.Load())

	// Restart every node on its data directory.
	for _, n := range ns {
		n.stop(syscall.SIGTERM)
	}
	for i, n := range ns {
		join := ""
		if i > 0 {
			join = fmt.Sprintf("127.0.0.1:%d", clusterPort)
		}
		check(n.start(join))
	}
	check(waitAlive(ns[0], len(ns), 60*time.Second))
	time.Sleep(3 * time.Second) // groups reopen, a leader is elected

	var got atomic.Int64
	var first, last atomic.Int64
	sub, err := mqttclient.Dial(ctx, ns[1].mqtt(), mqttclient.Options{ClientID: "replay-sub", KeepAlive: time.Minute,
		OnPublish: func(p *packet.Publish) {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			got.Add(1)
		}})
	check(err)
	defer sub.Close()
	asked := time.Now()
	_, err = sub.Subscribe(ctx, &packet.Subscribe{Subs: []packet.Subscription{{Filter: topic, QoS: 0}},
		Props: packet.Properties{User: []packet.UserProperty{{Key: "sx-from", Value: "earliest"}}}})
	check(err)
	for prev, idle := int64(-1), 0; got.Load() < int64(*records) && idle < 50; {
		time.Sleep(100 * time.Millisecond)
		if g := got.Load(); g == prev {
			idle++
		} else {
			prev, idle = g, 0
		}
	}
	n := got.Load()
	span := time.Duration(last.Load() - asked.UnixNano())
	fmt.Printf("replayed %d of %d records (sx-from=earliest, QoS 0, subscriber on %s) in %.2f s from SUBSCRIBE: %.0f records/s (first record after %.0f ms)\n",
		n, *records, ns[1].id, span.Seconds(), float64(n)/span.Seconds(), float64(first.Load()-asked.UnixNano())/1e6)
}
