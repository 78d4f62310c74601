package clustertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/delivery"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// faultStep is one fault of a seeded schedule: it starts, holds for Hold,
// is undone, and the next starts After later.
type faultStep struct {
	Kind  string // crash (then restart), stall (SIGSTOP, then SIGCONT), isolate, partition
	Node  int
	Other int // partition: the other node
	Hold  time.Duration
	After time.Duration
}

func (s faultStep) String() string {
	what := fmt.Sprintf("%s %s", s.Kind, nodeName(s.Node))
	if s.Kind == "partition" {
		what += " from " + nodeName(s.Other)
	}
	return fmt.Sprintf("%s for %v, then %v of calm", what, s.Hold, s.After)
}

// faultSchedule draws steps faults over nodes from rng: one fault at a time,
// so a majority of every group (replicas 3 on 3 nodes) and of the metadata
// group is always up once it is undone.
func faultSchedule(rng *rand.Rand, nodes, steps int) []faultStep {
	kinds := []string{"crash", "stall", "isolate", "partition"}
	out := make([]faultStep, steps)
	for i := range out {
		s := faultStep{Kind: kinds[rng.IntN(len(kinds))], Node: rng.IntN(nodes)}
		s.Other = (s.Node + 1 + rng.IntN(nodes-1)) % nodes
		s.Hold = time.Duration(200+rng.IntN(2800)) * time.Millisecond
		s.After = time.Duration(300+rng.IntN(900)) * time.Millisecond
		out[i] = s
	}
	return out
}

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
// nodes on memnet, a sequenced rule with replicas 3 over two topics, QoS 1
// and QoS 2 publishers on every node (MQTT 5, each with a window in
// flight), a subscriber with a persistent session on every node, and two
// readers of the topics' history (Node.History, from the home), under a
// seeded schedule of crashes (kill -9 and restart from the data
// directory), stalls (SIGSTOP/SIGCONT) and partitions. Then it checks, over
// the logs read back at the end: nothing acknowledged lost, indexes
// gap-free, every replica holding the same logs, every subscriber's
// messages a gap-free copy of the one order (all of it for the
// subscribers, which all stay subscribed), QoS 2 publishes once (but
// those outstanding when their publisher lost its access node), each
// publisher's order, and porcupine over the publishes and the history
// reads: the reads are linearizable.
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
	if err := run.Lin.CheckLinearizable(final, t.TempDir(), 2*time.Minute); err != nil {
		t.Error(err)
	} else {
		t.Logf("linearizable: %d operations (%d history reads)", len(ops), run.Lin.Reads())
	}
}

// checker workload settings.
const (
	chkWindow   = 8                     // publishes in flight per publisher
	chkGap      = 10 * time.Millisecond // between a publisher's publishes
	chkReadGap  = 15 * time.Millisecond
	chkReadWait = 3 * time.Second // a history read's deadline
)

var chkTopics = []string{"chk/a", "chk/b"}

func checkerRun(t *testing.T, seed uint64, steps int, run *SeqRun) map[string][]string {
	rng := rand.New(rand.NewPCG(seed, 14))
	const nodes = 3
	sched := faultSchedule(rng, nodes, steps)
	for i, s := range sched {
		t.Logf("schedule step %d: %v", i+1, s)
	}
	c := Start(t, nodes, nil, coreNodes, func(o *Options) { o.Seed = seed; o.Store = true })
	c.SetPolicy(fsm.Rule{Match: "chk/#", Mode: fsm.Sequenced, Replicas: 3})

	var wg, pwg, rwg sync.WaitGroup
	stopPub := make(chan struct{})  // publishers send no new message
	stopRead := make(chan struct{}) // readers stop
	stopSub := make(chan struct{})  // subscribers stop
	var once [3]sync.Once
	stopPublishers := func() { once[0].Do(func() { close(stopPub) }); pwg.Wait() }
	stopReaders := func() { once[1].Do(func() { close(stopRead) }); rwg.Wait() }
	stopSubscribers := func() { once[2].Do(func() { close(stopSub) }); wg.Wait() }
	// On a failure every client goroutine ends before the bubble does.
	defer stopSubscribers()
	defer stopReaders()
	defer stopPublishers()

	// Subscribers: one per node, persistent sessions, QoS 2.
	var subs []string
	var lostMu sync.Mutex
	var lostSession []string
	for i := range nodes {
		id := fmt.Sprintf("sub-%s", nodeName(i))
		cl := c.Node(i).Connect(id, ConnectOptions{SessionExpiry: 3600})
		run.Connected(id)
		cl.Subscribe(2, "chk/#")
		subs = append(subs, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				for alive := true; alive; {
					select {
					case m := <-cl.Msgs:
						run.Received(id, m)
					case <-cl.Done:
						alive = false
					case <-stopSub:
						return
					}
				}
				for _, m := range cl.Pending() {
					run.Received(id, m)
				}
				// Its node crashed: resume the session there once it is back.
				for cl = nil; cl == nil; {
					if !sleepOrStop(stopSub, 50*time.Millisecond) {
						return
					}
					n := c.Node(i)
					if !n.Running() || c.Net.Stalled(n.Host) {
						continue
					}
					next, err := n.TryConnect(id, ConnectOptions{Resume: true, SessionExpiry: 3600})
					if err != nil {
						continue
					}
					if !next.Connack.SessionPresent {
						lostMu.Lock()
						lostSession = append(lostSession, id)
						lostMu.Unlock()
					}
					run.Connected(id)
					cl = next
				}
			}
		}()
	}

	// Publishers: QoS 1 and 2 on every node.
	type pubSpec struct {
		node int
		qos  byte
	}
	specs := []pubSpec{{0, 1}, {1, 2}, {2, 1}, {2, 2}}
	var movedMu sync.Mutex
	moved := map[string]bool{} // publishers that lost their access node
	var pubs []string
	for k, sp := range specs {
		id := fmt.Sprintf("pub-%s-q%d", nodeName(sp.node), sp.qos)
		pubs = append(pubs, id)
		prng := rand.New(rand.NewPCG(seed, uint64(100+k)))
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			lost := checkerPublisher(c, run, k, id, sp.node, sp.qos, prng, stopPub)
			if lost {
				movedMu.Lock()
				moved[id] = true
				movedMu.Unlock()
			}
		}()
	}

	// Readers of the history, from the home, on any running node.
	for r := range 2 {
		rrng := rand.New(rand.NewPCG(seed, uint64(200+r)))
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			checkerReader(c, run, len(specs)+r, rrng, stopRead)
		}()
	}

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
	stopPublishers()
	for _, s := range subs {
		if !waitFor(s+" has every acknowledged publish", func() bool { return run.HasAll(s) }) {
			t.Errorf("%s: not every acknowledged publish within %v (the checks below say which)", s, Timeout)
		}
	}
	stopReaders()
	final := readFinalLogs(t, c, chkTopics)
	for i := range nodes {
		n := c.Node(i)
		if !waitFor("", func() bool {
			mine, err := readLogs(n.Current(), chkTopics, delivery.ReadAny)
			return err == nil && equalLogs(mine, final)
		}) {
			mine, err := readLogs(n.Current(), chkTopics, delivery.ReadAny)
			t.Errorf("%s's replica does not hold the home's logs (%s) within %v: %s, %v", n.ID, describeLogs(final), Timeout, describeLogs(mine), err)
		}
	}
	stopSubscribers()

	var inOrder []string
	for _, p := range pubs {
		if !moved[p] {
			inOrder = append(inOrder, p)
		}
	}
	complete := slices.Clone(subs)
	for _, s := range lostSession {
		t.Errorf("%s: its persistent session was not present when it reconnected after its node restarted", s)
		complete = slices.DeleteFunc(complete, func(x string) bool { return x == s })
	}
	for _, err := range run.Verify(final, complete, inOrder) {
		t.Error(err)
	}
	published, acked, resent := run.Stats()
	t.Logf("%d publishes (%d acknowledged, %d sent again after their access node was lost); logs: %s; %d history reads; publishers that moved: %v",
		published, acked, resent, describeLogs(final), run.Lin.Reads(), slices.Sorted(maps.Keys(moved)))
	return final
}

// checkerPublisher publishes to random topics of chkTopics from its node
// until stop, with a window in flight. When its connection ends (its node
// crashed) it connects through another running node and sends what was
// not acknowledged again (recorded as AccessLost), then goes on. After
// stop it still sends until everything it published is acknowledged. It
// reports whether it ever lost its access node.
func checkerPublisher(c *Cluster, run *SeqRun, client int, id string, home int, qos byte, rng *rand.Rand, stop <-chan struct{}) (lost bool) {
	var pending []string // to send (again), in the order first drawn
	topicOf := map[string]string{}
	seq := 0
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for attempt := 0; ; attempt++ {
		if stopped() && len(pending) == 0 {
			return lost
		}
		cl := connectAny(c, id, home, attempt)
		if cl == nil {
			return lost
		}
		slots := make(chan struct{}, chkWindow)
		var mu sync.Mutex
		var unacked []string
		var wg sync.WaitGroup
		dead := false
		for !dead {
			if len(pending) == 0 {
				if stopped() {
					break
				}
				p := fmt.Sprintf("%s-%05d", id, seq)
				seq++
				topicOf[p] = chkTopics[rng.IntN(len(chkTopics))]
				pending = append(pending, p)
			}
			select {
			case slots <- struct{}{}:
			case <-cl.Done:
				dead = true
				continue
			}
			p := pending[0]
			pending = pending[1:]
			run.Attempt(client, id, topicOf[p], p, qos)
			_, res := cl.PublishAsync(topicOf[p], qos, p, 0)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := <-res
				if r.Err == nil && r.Code == packet.Success {
					run.Acked(p)
				} else {
					mu.Lock()
					unacked = append(unacked, p)
					mu.Unlock()
				}
				<-slots
			}()
			time.Sleep(chkGap) // lint:sleep-ok fake time: the publisher's pace
		}
		wg.Wait()
		select {
		case <-cl.Done:
			lost = true
			run.AccessLost(unacked)
		default:
			cl.Close() // refused publishes (not a lost connection) go again too
		}
		pending = append(unacked, pending...)
		slices.SortFunc(pending, strings.Compare) // zero-padded: the order drawn
	}
}

// connectAny connects id to node home if it runs and is not stalled, else
// to another such node, retrying until one accepts.
func connectAny(c *Cluster, id string, home, attempt int) *Client {
	nodes := len(c.Nodes())
	for try := 0; ; try++ {
		i := (home + attempt + try) % nodes
		if attempt == 0 {
			i = (home + try) % nodes
		}
		n := c.Node(i)
		if n.Running() && !c.Net.Stalled(n.Host) {
			if cl, err := n.TryConnect(id, ConnectOptions{}); err == nil {
				return cl
			}
		}
		time.Sleep(20 * time.Millisecond) // lint:sleep-ok fake time: wait for a node to take the client
		if try > 10000 {
			return nil
		}
	}
}

// checkerReader reads the topics' history from the home through random
// running nodes until stop: latest(), and index reads around the latest
// it saw, recording each with its outcome. Failed reads (no replica
// answered, the deadline passed) are left out: they observed nothing.
func checkerReader(c *Cluster, run *SeqRun, client int, rng *rand.Rand, stop <-chan struct{}) {
	seen := map[string]uint64{}
	for sleepOrStop(stop, chkReadGap) {
		n := c.Node(rng.IntN(len(c.Nodes()))).Current()
		if n == nil {
			continue
		}
		topic := chkTopics[rng.IntN(len(chkTopics))]
		ctx, cancel := context.WithTimeout(context.Background(), chkReadWait)
		call := run.Lin.Now()
		if rng.IntN(3) == 0 {
			info, err := n.History().Topic(ctx, topic, delivery.ReadHome)
			switch {
			case err == nil:
				run.Lin.Latest(client, topic, call, info.Latest)
				seen[topic] = max(seen[topic], info.Latest)
			case errors.Is(err, delivery.ErrUnknownTopic):
				run.Lin.Latest(client, topic, call, 0)
			}
			cancel()
			continue
		}
		lo := max(int(seen[topic])-4, 1)
		idx := uint64(lo + rng.IntN(8))
		recs, _, err := n.History().Messages(ctx, topic, idx, 1, delivery.ReadHome)
		cancel()
		switch {
		case err == nil && len(recs) == 0:
			run.Lin.Read(client, topic, idx, call, false, "")
		case err == nil && recs[0].Index == idx:
			run.Lin.Read(client, topic, idx, call, true, string(recs[0].Message.Payload))
			seen[topic] = max(seen[topic], idx)
		case err == nil:
			// A record other than the one asked for: a read that
			// answers with the wrong index is a wrong answer.
			run.Lin.Read(client, topic, idx, call, true, fmt.Sprintf("<index %d: %s>", recs[0].Index, recs[0].Message.Payload))
		case errors.Is(err, delivery.ErrUnknownTopic):
			run.Lin.Read(client, topic, idx, call, false, "")
		}
	}
}

// readFinalLogs reads every topic's whole log from its home, checking
// that the indexes are gap-free from 1.
func readFinalLogs(t *testing.T, c *Cluster, topics []string) map[string][]string {
	t.Helper()
	var out map[string][]string
	var last error
	c.Eventually("the final logs read", func() bool {
		for _, n := range c.Nodes() {
			if nd := n.Current(); nd != nil {
				out, last = readLogs(nd, topics, delivery.ReadHome)
				return last == nil
			}
		}
		return false
	})
	if last != nil {
		t.Fatal(last)
	}
	return out
}

// historyReader is what readLogs needs of a node.
type historyReader interface{ History() *delivery.History }

func readLogs(n historyReader, topics []string, where delivery.Read) (map[string][]string, error) {
	if n == nil {
		return nil, errors.New("node not running")
	}
	out := map[string][]string{}
	for _, topic := range topics {
		var log []string
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			recs, info, err := n.History().Messages(ctx, topic, uint64(len(log)+1), 1000, where)
			cancel()
			if errors.Is(err, delivery.ErrUnknownTopic) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s from %d: %w", topic, len(log)+1, err)
			}
			for _, r := range recs {
				if r.Index != uint64(len(log)+1) {
					return nil, fmt.Errorf("%s: index %d after %d: the log has a gap", topic, r.Index, len(log))
				}
				log = append(log, string(r.Message.Payload))
			}
			if len(recs) == 0 || uint64(len(log)) >= info.Latest {
				if uint64(len(log)) != info.Latest {
					return nil, fmt.Errorf("%s: read %d records, latest is %d", topic, len(log), info.Latest)
				}
				break
			}
		}
		out[topic] = log
	}
	return out, nil
}

func equalLogs(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func describeLogs(logs map[string][]string) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(logs)) {
		parts = append(parts, fmt.Sprintf("%s %d records", t, len(logs[t])))
	}
	return strings.Join(parts, ", ")
}

// waitFor polls cond until it holds or Timeout passes (fake time in a
// bubble), reporting whether it held.
func waitFor(_ string, cond func() bool) bool {
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // lint:sleep-ok fake time: polling
	}
	return true
}

// sleepOrStop sleeps d unless stop closes first; it reports whether to go
// on.
func sleepOrStop(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
