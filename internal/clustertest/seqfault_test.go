package clustertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/delivery"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// envInt reads a positive integer setting from the environment.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// TestSequencedChecker is issue 14's checker on the in-process cluster: 3
// nodes on memnet with stores, a sequenced rule with replicas 3 over two
// topics, QoS 1 and QoS 2 publishers on every node (MQTT 5, each with a
// window in flight), a subscriber with a persistent session on every
// node, and two readers of the topics' history (Node.History, from the
// leader), under a seeded schedule of crashes (kill -9 and restart from
// the data directory: Cluster.Crash), stalls (SIGSTOP/SIGCONT:
// Cluster.Stall) and partitions (a node isolated, or two nodes cut
// apart). Then it checks, over the logs read back at the end: nothing
// acknowledged lost, indexes gap-free, every replica holding the same
// logs, every subscriber's messages a gap-free copy of the one order (all
// of it: they all stay subscribed), QoS 2 publishes once (but those
// outstanding when their publisher lost its access node), each
// publisher's order, and porcupine over the publishes and the history
// reads: the reads are linearizable (SeqRun.Verify, LinRecorder).
//
// SEXTANT_TEST_SEED picks the schedule (default 1); SEXTANT_SEQCHECK_STEPS
// the number of faults (default 4; a soak sets more).
func TestSequencedChecker(t *testing.T) {
	seed := testSeed(t)
	steps := envInt(t, "SEXTANT_SEQCHECK_STEPS", 4)
	run := NewSeqRun()
	var final map[string][]string
	synctest.Test(t, func(t *testing.T) {
		final = checkerRun(t, seed, steps, run)
	})
	if t.Failed() || final == nil {
		return
	}
	ops := run.Lin.History(final)
	if err := run.Lin.CheckLinearizable(final, "", 2*time.Minute); errors.Is(err, ErrNoVerdict) {
		t.Log(err) // not a violation: a history longer than the check could take
	} else if err != nil {
		t.Error(err)
		for _, s := range run.Lin.Stale(final, 10) {
			t.Errorf("stale read: %s", s)
		}
	} else {
		t.Logf("linearizable: %d operations (%d history reads)", len(ops), run.Lin.Reads())
	}
}

var chkTopics = []string{"chk/a", "chk/b"}

func checkerRun(t *testing.T, seed uint64, steps int, run *SeqRun) map[string][]string {
	rng := rand.New(rand.NewPCG(seed, 14))
	const nodes = 3
	sched := FaultSchedule(rng, []string{"crash", "stall", "isolate", "partition"}, nodes, steps, 2*time.Second)
	for i, s := range sched {
		t.Logf("schedule step %d: %v", i+1, s)
	}
	c := Start(t, nodes, nil, coreNodes, func(o *Options) { o.Seed = seed; o.Store = true })
	c.SetPolicy(fsm.Rule{Match: "chk/#", Mode: fsm.Sequenced, Replicas: 3})
	target := c.SeqTarget()
	load := &SeqLoad{T: t, Target: target, Run: run, Topics: chkTopics, Filter: "chk/#", Seed: seed,
		Window: 8, Gap: 20 * time.Millisecond, ReadGap: 15 * time.Millisecond, Retry: 50 * time.Millisecond, MaxPublishes: 400}
	defer load.Stop() // on a failure every client goroutine ends before the bubble does
	load.Start([]PubSpec{{0, 1}, {1, 2}, {2, 1}, {2, 2}}, 2)

	time.Sleep(500 * time.Millisecond) // lint:sleep-ok fake time: traffic before the first fault
	for i, s := range sched {
		t.Logf("step %d at %v: %v", i+1, time.Now().Format("15:04:05.000"), s)
		switch s.Kind {
		case "crash":
			c.Crash(s.Node)
		case "stall":
			c.Stall(s.Node)
		case "isolate":
			c.Isolate(s.Node)
		case "partition":
			c.Partition(s.Node, s.Other)
		}
		time.Sleep(s.Hold) // lint:sleep-ok fake time: the fault's length, from the seed
		switch s.Kind {
		case "crash":
			c.Restart(s.Node)
		case "stall":
			c.Resume(s.Node)
		case "isolate":
			c.Rejoin(s.Node)
		case "partition":
			c.Heal(s.Node, s.Other)
		}
		time.Sleep(s.After) // lint:sleep-ok fake time: calm between faults, from the seed
	}
	c.WaitConverged()
	load.StopPublishers()
	subs := load.Subscribers()
	for _, s := range subs {
		if !waitFor(func() bool { return run.HasAll(s) }) {
			t.Errorf("%s: not every acknowledged publish within %v (the checks below say which)", s, Timeout)
		}
	}
	load.StopReaders()
	var final map[string][]string
	var err error
	if !waitFor(func() bool { final, err = ReadSeqLogs(target, 0, chkTopics); return err == nil }) {
		t.Fatalf("the final logs: %v", err)
	}
	for i := range nodes {
		checkReplica(t, c.Node(i), final)
	}
	load.StopSubscribers()

	complete := slices.Clone(subs)
	for _, s := range load.LostSessions() {
		t.Errorf("%s: its persistent session was not present when it reconnected after its node restarted", s)
		complete = slices.DeleteFunc(complete, func(x string) bool { return x == s })
	}
	for _, err := range run.Verify(final, complete, load.InOrder()) {
		t.Error(err)
	}
	published, acked, resent := run.Stats()
	t.Logf("%d publishes (%d acknowledged, %d sent again after their access node was lost); logs: %s; %d history reads; publishers that moved: %v",
		published, acked, resent, DescribeLogs(final), run.Lin.Reads(), load.Moved())
	return final
}

// checkReplica checks that node n's replica holds the final logs once it
// has caught up.
func checkReplica(t *testing.T, n *Node, final map[string][]string) {
	t.Helper()
	caughtUp := waitFor(func() bool {
		for topic, log := range final {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			info, err := n.Current().History().Topic(ctx, topic, delivery.ReadAny)
			cancel()
			if err != nil || info.ServedBy != n.ID || info.Latest != uint64(len(log)) {
				return false
			}
		}
		return true
	})
	if !caughtUp {
		t.Errorf("%s's replica has not caught up with the leader's logs (%s) within %v", n.ID, DescribeLogs(final), Timeout)
		return
	}
	for topic, log := range final {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		recs, _, err := n.Current().History().Messages(ctx, topic, 1, len(log)+1, delivery.ReadAny)
		cancel()
		if err != nil {
			t.Errorf("%s's replica: %s: %v", n.ID, topic, err)
			continue
		}
		for k, r := range recs {
			if k >= len(log) || r.Index != uint64(k+1) || string(r.Message.Payload) != log[k] {
				t.Errorf("%s's replica differs from the leader's log of %s at index %d", n.ID, topic, k+1)
				break
			}
		}
	}
}

// waitFor polls cond until it holds or Timeout passes (fake time in a
// bubble), reporting whether it held.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // lint:sleep-ok fake time: polling
	}
	return true
}
