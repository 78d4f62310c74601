package monitor

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

type fakeClient struct {
	id  string
	rtt time.Duration
}

func (c *fakeClient) ClientID() string         { return c.id }
func (c *fakeClient) AccessRTT() time.Duration { return c.rtt }

var _ Client = (*fakeClient)(nil)

func cl(id string, rttMS float64) *fakeClient {
	return &fakeClient{id: id, rtt: time.Duration(rttMS * float64(time.Millisecond))}
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func byTopic(rs []TopicReport) map[string]TopicReport {
	m := map[string]TopicReport{}
	for _, r := range rs {
		m[r.Topic] = r
	}
	return m
}

func TestTrackerFoldsProducersAndConsumers(t *testing.T) {
	tr := NewTracker(Limits{})
	p1, p2, p3 := cl("p1", 4), cl("p2", 10), cl("p3", 1)
	for i := 0; i < 30; i++ {
		tr.Published(p1, "swarm/7/pos")
	}
	for i := 0; i < 20; i++ {
		tr.Published(p2, "swarm/7/pos")
	}
	tr.Published(p3, "swarm/8/pos")
	// Consumers: an exact filter, a wildcard, a $share group and a client
	// holding two filters that match (counted once).
	tr.Subscribed(cl("c1", 2), "swarm/7/pos")
	tr.Subscribed(cl("c2", 30), "swarm/+/pos")
	tr.Subscribed(cl("c3", 5), "$share/g/swarm/#")
	tr.Subscribed(cl("c4", 8), "swarm/7/pos")
	tr.Subscribed(cl("c4", 8), "swarm/#")
	tr.Subscribed(cl("c5", 50), "other/#")
	for i := 0; i < 40; i++ {
		tr.Delivered("swarm/7/pos")
	}
	got := byTopic(tr.Report(10 * time.Second))
	want := map[string]TopicReport{
		"swarm/7/pos": {Topic: "swarm/7/pos",
			Producers: Side{Count: 2, MaxRTT: ms(10), Rate: 5},
			Consumers: Side{Count: 4, MaxRTT: ms(30), Rate: 4}},
		"swarm/8/pos": {Topic: "swarm/8/pos",
			Producers: Side{Count: 1, MaxRTT: ms(1), Rate: 0.1},
			Consumers: Side{Count: 3, MaxRTT: ms(30)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("report\n%+v\nwant\n%+v", got, want)
	}
	// The next window starts at zero counts; the producers stay.
	got = byTopic(tr.Report(5 * time.Second))
	if s := got["swarm/7/pos"].Producers; s.Count != 2 || s.Rate != 0 {
		t.Fatalf("second window producers %+v, want 2 at rate 0", s)
	}
	// Unsubscribe, leave, reconnect with another RTT.
	tr.Unsubscribed("c2", "swarm/+/pos")
	tr.Unsubscribed("c4", "swarm/#") // c4 still holds swarm/7/pos
	tr.Gone("p2")
	tr.Published(cl("p1", 20), "swarm/7/pos")
	got = byTopic(tr.Report(time.Second))
	if s := got["swarm/7/pos"]; s.Producers != (Side{Count: 1, MaxRTT: ms(20), Rate: 1}) || s.Consumers.Count != 3 || s.Consumers.MaxRTT != ms(8) {
		t.Fatalf("after changes %+v", s)
	}
	if s := got["swarm/8/pos"].Consumers; s.Count != 1 || s.MaxRTT != ms(5) {
		t.Fatalf("swarm/8/pos consumers %+v, want c3 only", s)
	}
	tr.Gone("c1")
	tr.Gone("c3")
	tr.Gone("c4")
	tr.Gone("c5")
	tr.Gone("p1")
	tr.Gone("p3")
	tr.mu.Lock()
	entries, clients := tr.mu.entries, len(tr.mu.byClient)
	tr.mu.Unlock()
	if entries != 0 || clients != 0 {
		t.Fatalf("after everyone left: %d entries, %d clients indexed", entries, clients)
	}
}

func TestTrackerForgetsIdleTopicsAndProducers(t *testing.T) {
	tr := NewTracker(Limits{IdleReports: 2})
	tr.Published(cl("p", 1), "a")
	tr.Published(cl("q", 1), "b")
	tr.Subscribed(cl("c", 1), "b")
	for round := 1; round <= 3; round++ {
		tr.Published(cl("q", 1), "b") // b stays busy
		if got := byTopic(tr.Report(time.Second)); got["a"].Producers.Count != 1 {
			t.Fatalf("report %d: a forgotten too early: %+v", round, got)
		}
	}
	got := byTopic(tr.Report(time.Second))
	if _, ok := got["a"]; ok {
		t.Fatalf("idle topic a still reported: %+v", got["a"])
	}
	if got["b"].Consumers.Count != 1 || got["b"].Producers.Count != 1 {
		t.Fatalf("b: %+v", got["b"])
	}
	tr.mu.Lock()
	_, pIndexed := tr.mu.byClient["p"]
	tr.mu.Unlock()
	if pIndexed {
		t.Fatal("the idle producer is still indexed")
	}
}

func TestTrackerBoundsAreCounted(t *testing.T) {
	tr := NewTracker(Limits{MaxTopics: 2, MaxClients: 3})
	for i := 0; i < 4; i++ {
		tr.Published(cl(fmt.Sprint("p", i), 1), fmt.Sprint("t", i%3))
	}
	tr.Subscribed(cl("c", 1), "t0")
	got := tr.Report(time.Second)
	if len(got) != 2 {
		t.Fatalf("%d topics reported, want 2: %+v", len(got), got)
	}
	d := tr.Dropped()
	// p2 on t2 is a third topic; p3 on t0 the third entry; c's
	// subscription a fourth.
	if d[DropTopics] != 1 || d[DropClients] != 1 {
		t.Fatalf("dropped %v", d)
	}
}

// Observers are called from every session's goroutine while the agent
// reports: run under -race.
func TestTrackerConcurrentUse(t *testing.T) {
	tr := NewTracker(Limits{})
	var wg sync.WaitGroup
	const workers, msgs = 8, 500
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cl(fmt.Sprint("c", w), float64(w))
			for i := 0; i < msgs; i++ {
				tr.Published(c, fmt.Sprint("t", i%5))
				tr.Delivered(fmt.Sprint("t", i%5))
				if i%50 == 0 {
					tr.Subscribed(c, "t/#")
					tr.Unsubscribed(c.id, "t/#")
				}
			}
			tr.Gone(c.id)
		}()
	}
	total := 0.0
	done := make(chan struct{})
	go func() {
		defer close(done)
		wg.Wait()
	}()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for _, r := range tr.Report(time.Second) {
			total += r.Producers.Rate
		}
	}
	if total != workers*msgs {
		t.Fatalf("reported %v messages over the windows, want %d", total, workers*msgs)
	}
}
