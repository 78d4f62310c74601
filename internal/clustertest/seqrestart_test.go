package clustertest

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// TestSequencedBacklogAcrossRestart: a persistent session on a sequenced
// topic whose node crashes (kill -9 analogue, Crash) or halts (Kill) and
// comes back from its data directory gets, when its client resumes it,
// every record it had not received, from its stored cursor on, then live
// ones, while a publisher on another node keeps publishing throughout:
// nothing is lost to a subscriber that stays subscribed. (Records it
// received but had not acknowledged when its node went down come again:
// MQTT redelivers them.)
func TestSequencedBacklogAcrossRestart(t *testing.T) {
	for _, how := range []string{"kill", "crash"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := Start(t, 3, nil, coreNodes, func(o *Options) { o.Store = true })
				c.SetPolicy(fsm.Rule{Match: "rs/#", Mode: fsm.Sequenced, Replicas: 3})
				opts := ConnectOptions{SessionExpiry: 3600}
				sub := c.Node(1).Connect("keeper", opts)
				sub.Subscribe(2, "rs/#")
				pub := c.Node(2).Connect("pub", ConnectOptions{})
				const total = 400
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 1; i <= total; i++ {
						if _, err := pub.TryPublish("rs/a", 1, false, fmt.Sprintf("m%d", i)); err != nil {
							t.Errorf("publish %d: %v", i, err)
							return
						}
						time.Sleep(5 * time.Millisecond) // lint:sleep-ok fake time: the publisher's pace
					}
				}()
				first := sub.Collect(20)
				checkRun(t, "online", first, "rs/a", 1)
				if how == "kill" {
					c.Kill(1)
				} else {
					c.Crash(1)
				}
				time.Sleep(time.Second) // lint:sleep-ok fake time: down for a while
				c.Restart(1)
				back := c.Node(1).Connect("keeper", ConnectOptions{SessionExpiry: 3600, Resume: true})
				if !back.Connack.SessionPresent {
					t.Fatal("the session was not kept across the restart")
				}
				wg.Wait()
				got := map[uint64]bool{}
				for _, m := range first {
					got[m.Index] = true
				}
				prev := uint64(0)
				for len(got) < total {
					m := back.Next()
					if prev != 0 && m.Index != prev+1 {
						t.Fatalf("back: index %d after %d", m.Index, prev)
					}
					if prev == 0 && m.Index > 21 {
						t.Fatalf("back: resumed at index %d after 20: a gap", m.Index)
					}
					prev = m.Index
					got[m.Index] = true
				}
			})
		})
	}
}

// TestSequencedBacklogOfGroupCreatedWhileDown: a persistent session
// subscribed before a group existed, and its node was killed before the
// session took any record of it (its stored record has no cursor on the
// group). The group is created while the node is down; after the restart
// the session gets every record from the first, not only those appended
// after the restart. Found by TestProcessSequencedChecker (seed 1: the
// first 84 records of a topic never reached the subscriber on a crashed
// node).
func TestSequencedBacklogOfGroupCreatedWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes, func(o *Options) { o.Store = true })
		c.SetPolicy(fsm.Rule{Match: "rs/#", Mode: fsm.Sequenced, Replicas: 3})
		sub := c.Node(1).Connect("keeper", ConnectOptions{SessionExpiry: 3600})
		sub.Subscribe(2, "rs/#")
		c.Crash(1)
		pub := c.Node(2).Connect("pub", ConnectOptions{})
		const total = 30
		for i := 1; i <= total; i++ {
			if _, err := pub.TryPublish("rs/new", 1, false, fmt.Sprintf("m%d", i)); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		time.Sleep(time.Second) // lint:sleep-ok fake time: down for a while after the publishes
		c.Restart(1)
		back := c.Node(1).Connect("keeper", ConnectOptions{SessionExpiry: 3600, Resume: true})
		if !back.Connack.SessionPresent {
			t.Fatal("the session was not kept across the restart")
		}
		for want := uint64(1); want <= total; want++ {
			if m := back.Next(); m.Index != want {
				t.Fatalf("back: index %d, want %d (the records appended while the node was down are the session's backlog)", m.Index, want)
			}
		}
	})
}
