package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/store"
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

// TestSequencedCompletedNotRepeatedAfterCrash: a persistent QoS 2
// session completes (PUBCOMP) a run of records of a sequenced topic, then
// its node dies as in a kill -9: the node's store file is put back as it
// was then, before the halt's own writes (its session record at
// disconnect). When the client resumes on the restarted node, its backlog
// starts after the last record it took: nothing it completed comes again.
// (The stored cursor was the session record's, written with its first
// record of the group: every record since came again, same sx-index.)
func TestSequencedCompletedNotRepeatedAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes, func(o *Options) { o.Store = true })
		c.SetPolicy(fsm.Rule{Match: "rq/#", Mode: fsm.Sequenced, Replicas: 3})
		sub := c.Node(1).Connect("keeper", ConnectOptions{SessionExpiry: 3600})
		sub.Subscribe(2, "rq/#")
		pub := c.Node(2).Connect("pub", ConnectOptions{})
		const before, after = 40, 10
		for i := 1; i <= before; i++ {
			pub.Publish("rq/a", 2, false, fmt.Sprintf("m%d", i))
		}
		checkRun(t, "online", sub.Collect(before), "rq/a", 1)
		time.Sleep(time.Second) // lint:sleep-ok fake time: the completions reach the node and its store

		db := filepath.Join(c.Node(1).dataDir, "sextant.db")
		image, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		c.Crash(1)
		if err := os.WriteFile(db, image, 0o600); err != nil {
			t.Fatal(err)
		}
		for i := before + 1; i <= before+after; i++ {
			pub.Publish("rq/a", 2, false, fmt.Sprintf("m%d", i))
		}
		c.Restart(1)
		back := c.Node(1).Connect("keeper", ConnectOptions{SessionExpiry: 3600, Resume: true})
		if !back.Connack.SessionPresent {
			t.Fatal("the session was not kept across the crash")
		}
		checkRun(t, "after the crash", back.Collect(after), "rq/a", before+1)
	})
}

// TestSequencedInFlightAfterCrash: a persistent QoS 2 session (a client
// that answers as the test says) completes records 1 to 30, sends PUBREC
// for 31 to 35 without completing them, and leaves 36 to 40 unanswered;
// then its node dies as in a kill -9 (its store file put back as it was).
// On resume: 31 to 35 get their PUBREL again (no message), 36 to 40 come
// again from the session's stored queue with DUP, then the records
// published meanwhile; none of 1 to 35 is delivered again, none twice.
func TestSequencedInFlightAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes, func(o *Options) { o.Store = true })
		c.SetPolicy(fsm.Rule{Match: "rf/#", Mode: fsm.Sequenced, Replicas: 3})
		n := c.Node(1)
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		conn, err := c.Net.Dial(ctx, n.Host, fmt.Sprintf("%s:%d", n.Host, mqttPort))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		send := func(p packet.Packet) {
			t.Helper()
			b, err := p.Append(nil, packet.V5)
			if err == nil {
				_, err = conn.Write(b)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		r := packet.NewReader(conn, 0)
		r.SetVersion(packet.V5)
		recv := func() packet.Packet {
			t.Helper()
			p, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: true, ClientID: "keeper", KeepAlive: 600}
		cp.Props.SetSessionExpiry(3600)
		send(cp)
		if ack, ok := recv().(*packet.Connack); !ok || ack.ReasonCode != packet.Success {
			t.Fatal("no CONNACK")
		}
		send(&packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{{Filter: "rf/#", QoS: 2}}})
		if _, ok := recv().(*packet.Suback); !ok {
			t.Fatal("no SUBACK")
		}
		pub := c.Node(2).Connect("pub", ConnectOptions{})
		const taken, after = 40, 10
		for i := 1; i <= taken; i++ {
			pub.Publish("rf/a", 2, false, fmt.Sprintf("m%d", i))
		}
		record := map[uint16]int{} // packet id -> the record sent with it
		for i, released := 1, 0; i <= taken || released < 35; {
			switch p := recv().(type) {
			case *packet.Publish:
				if want := fmt.Sprintf("m%d", i); string(p.Payload) != want {
					t.Fatalf("got %q, want %q", p.Payload, want)
				}
				record[p.PacketID] = i
				if i <= 35 {
					send(&packet.Ack{Kind: packet.PUBREC, PacketID: p.PacketID})
				}
				i++
			case *packet.Ack:
				if p.Kind != packet.PUBREL {
					t.Fatalf("got %s", packet.Describe(p))
				}
				released++
				if record[p.PacketID] <= 30 {
					send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID})
				}
			}
		}
		time.Sleep(time.Second) // lint:sleep-ok fake time: the acknowledgements reach the node and its store

		db := filepath.Join(n.dataDir, "sextant.db")
		image, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		c.Crash(1)
		if err := os.WriteFile(db, image, 0o600); err != nil {
			t.Fatal(err)
		}
		for i := taken + 1; i <= taken+after; i++ {
			pub.Publish("rf/a", 2, false, fmt.Sprintf("m%d", i))
		}
		c.Restart(1)
		back := n.Connect("keeper", ConnectOptions{SessionExpiry: 3600, Resume: true})
		if !back.Connack.SessionPresent {
			t.Fatal("the session was not kept across the crash")
		}
		got := back.Collect(taken + after - 35)
		for k, m := range got {
			want := uint64(36 + k)
			if m.Index != want || m.Payload != fmt.Sprintf("m%d", want) || m.Dup != (want <= taken) {
				t.Fatalf("after the crash, message %d: %v index %d dup %v; want index %d dup %v", k, m, m.Index, m.Dup, want, want <= taken)
			}
		}
		time.Sleep(time.Second) // lint:sleep-ok fake time: anything more would have come
		if extra := back.Pending(); len(extra) > 0 {
			t.Fatalf("%d messages more, first %v index %d", len(extra), extra[0], extra[0].Index)
		}
	})
}

// TestSequencedQoS2OnceAcrossCrashInGroupCommit: records reach a
// persistent QoS 2 session while its node's store has not written their
// delivery batches yet (the store held, as a group commit that takes
// long), then the node dies as in a kill -9 at that moment (its store file
// put back as it was; the client's connection gone first, so what it
// holds is what it had then). The client (a correct QoS 2 receiver, its
// Receiver kept across connections) resumes the session on the restarted
// node: under SeqRun.Verify no record reaches it twice. (Sent before their
// batch was durable, records 6 to 10 reached it before the crash and,
// their cursor lost, again from the log after it.)
func TestSequencedQoS2OnceAcrossCrashInGroupCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Start(t, 3, nil, coreNodes, func(o *Options) { o.Store = true })
		c.SetPolicy(fsm.Rule{Match: "rg/#", Mode: fsm.Sequenced, Replicas: 3})
		const topic, sub = "rg/a", "keeper"
		run := NewSeqRun()
		n := c.Node(1)
		recv := NewReceiver()
		cl := n.Connect(sub, ConnectOptions{SessionExpiry: 3600, Receiver: recv})
		run.Connected(sub)
		cl.Subscribe(2, "rg/#")
		pub := c.Node(2).Connect("pub", ConnectOptions{})
		publish := func(from, to int) {
			for i := from; i <= to; i++ {
				p := fmt.Sprintf("m%d", i)
				run.Attempt(0, "pub", topic, p, 2)
				if code := pub.Publish(topic, 2, false, p); code.IsError() {
					t.Fatalf("publish %s: %v", p, code)
				}
				run.Acked(p)
			}
		}
		publish(1, 5)
		for _, m := range cl.Collect(5) {
			run.Received(sub, m)
		}
		time.Sleep(time.Second) // lint:sleep-ok fake time: the completions reach the node and its store

		// Hold the store: its writer goroutine blocks in the done of a
		// batch of the test's, every later batch waits in its queue.
		st := n.Current().Store()
		gate := make(chan struct{})
		if err := st.Commit(context.Background(), &store.Batch{}, func(error) { <-gate }); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(n.dataDir, "sextant.db")
		image, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		publish(6, 10)
		time.Sleep(time.Second) // lint:sleep-ok fake time: what is sent reaches the client
		cl.Drop()
		early := cl.Pending()
		for _, m := range early {
			run.Received(sub, m)
		}
		t.Logf("records received while the store held their batches: %d", len(early))
		close(gate)
		c.Crash(1)
		if err := os.WriteFile(db, image, 0o600); err != nil {
			t.Fatal(err)
		}
		publish(11, 12)
		c.Restart(1)
		back := n.Connect(sub, ConnectOptions{SessionExpiry: 3600, Resume: true, Receiver: recv})
		if !back.Connack.SessionPresent {
			t.Fatal("the session was not kept across the crash")
		}
		run.Connected(sub)
		for !run.HasAll(sub) {
			run.Received(sub, back.Next())
		}
		time.Sleep(time.Second) // lint:sleep-ok fake time: anything more would have come
		for _, m := range back.Pending() {
			run.Received(sub, m)
		}
		final, err := ReadSeqLogs(c.SeqTarget(), 0, []string{topic})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range run.Verify(final, []string{sub}, []string{"pub"}) {
			t.Error(err)
		}
	})
}
