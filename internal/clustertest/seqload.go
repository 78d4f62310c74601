package clustertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// The workload of issue 14's checkers, shared by the in-process one
// (TestSequencedChecker, memnet) and the process-level one (internal/node,
// real `sextant serve` processes): publishers, persistent subscribers and
// history readers on a SeqTarget, recorded in a SeqRun, under a seeded
// schedule of FaultSteps.

// SeqTarget is a cluster the checker's clients use.
type SeqTarget interface {
	// Nodes is the number of nodes.
	Nodes() int
	// Usable reports whether node i runs and is not stopped: clients
	// connect only to usable nodes.
	Usable(i int) bool
	// Connect connects an MQTT 5 client to node i.
	Connect(i int, id string, o ConnectOptions) (*Client, error)
	// Records reads topic's records from index from through node i, from
	// the group's leader (linearizable), and the latest index; an unknown
	// topic (nothing published yet) is no records and latest 0. An error
	// is a read that observed nothing. note says where it was served.
	Records(ctx context.Context, i int, topic string, from uint64, limit int) (recs []SeqRecord, latest uint64, note string, err error)
}

// SeqRecord is one record of a topic read back.
type SeqRecord struct {
	Index   uint64
	Payload string
}

// FaultStep is one fault of a seeded schedule: it starts, holds for Hold,
// is undone, and the next starts After later.
type FaultStep struct {
	Kind  string // crash (kill -9, then restart), stall (SIGSTOP, then SIGCONT), isolate, partition
	Node  int
	Other int // partition: the other node
	Hold  time.Duration
	After time.Duration
}

func (s FaultStep) String() string {
	what := fmt.Sprintf("%s %s", s.Kind, nodeName(s.Node))
	if s.Kind == "partition" {
		what += " from " + nodeName(s.Other)
	}
	return fmt.Sprintf("%s for %v, then %v of calm", what, s.Hold, s.After)
}

// FaultSchedule draws steps faults of the given kinds over nodes from rng:
// one fault at a time, so a majority of every group (replicas 3 on 3
// nodes) and of the metadata group is up again once it is undone. Holds
// are from 200 ms to maxHold.
func FaultSchedule(rng *rand.Rand, kinds []string, nodes, steps int, maxHold time.Duration) []FaultStep {
	out := make([]FaultStep, steps)
	for i := range out {
		s := FaultStep{Kind: kinds[rng.IntN(len(kinds))], Node: rng.IntN(nodes)}
		s.Other = (s.Node + 1 + rng.IntN(nodes-1)) % nodes
		s.Hold = 200*time.Millisecond + time.Duration(rng.Int64N(int64(maxHold-200*time.Millisecond)))
		s.Hold = s.Hold.Round(time.Millisecond)
		s.After = time.Duration(300+rng.IntN(900)) * time.Millisecond
		out[i] = s
	}
	return out
}

// SeqLoad runs the checker's clients on a target. Set the fields, then
// Start; StopPublishers, StopReaders and StopSubscribers end them (each
// may be called more than once; Stop ends all).
type SeqLoad struct {
	T       testing.TB
	Target  SeqTarget
	Run     *SeqRun
	Topics  []string
	Filter  string        // the subscribers' filter
	Seed    uint64        // for the publishers' topics and the readers' choices
	Window  int           // publishes in flight per publisher
	Gap     time.Duration // between a publisher's publishes
	ReadGap time.Duration // between a reader's reads
	// Retry is how long clients wait before trying a node again.
	Retry time.Duration
	// MaxPublishes bounds each publisher's messages (0: no bound): a
	// schedule that runs long does not make the history porcupine checks
	// longer.
	MaxPublishes int

	subs, pubs   []string
	wg, pwg, rwg sync.WaitGroup
	stopPub      chan struct{}
	stopRead     chan struct{}
	stopSub      chan struct{}
	once         [3]sync.Once
	mu           sync.Mutex
	moved        map[string]bool // publishers that lost their access node
	lostSession  []string
}

// PubSpec is a publisher: its node and QoS.
type PubSpec struct {
	Node int
	QoS  byte
}

// Start connects a subscriber with a persistent session to every node
// (QoS 2, on Filter) and starts the publishers and readers readers.
func (l *SeqLoad) Start(pubs []PubSpec, readers int) {
	l.T.Helper()
	l.stopPub, l.stopRead, l.stopSub = make(chan struct{}), make(chan struct{}), make(chan struct{})
	l.moved = map[string]bool{}
	for i := range l.Target.Nodes() {
		id := "sub-" + nodeName(i)
		recv := NewReceiver() // the session's, across its connections
		cl, err := l.Target.Connect(i, id, ConnectOptions{SessionExpiry: 3600, Receiver: recv})
		if err != nil {
			l.T.Fatalf("%s: %v", id, err)
		}
		l.Run.Connected(id)
		for _, c := range cl.SubscribeCodes(nil, 2, l.Filter) {
			if c.IsError() {
				l.T.Fatalf("%s: subscribe refused: %v", id, c)
			}
		}
		l.subs = append(l.subs, id)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.subscriber(i, id, cl, recv)
		}()
	}
	for k, sp := range pubs {
		id := fmt.Sprintf("pub-%s-q%d", nodeName(sp.Node), sp.QoS)
		l.pubs = append(l.pubs, id)
		rng := rand.New(rand.NewPCG(l.Seed, uint64(100+k)))
		l.pwg.Add(1)
		go func() {
			defer l.pwg.Done()
			if l.publisher(k, id, sp.Node, sp.QoS, rng) {
				l.mu.Lock()
				l.moved[id] = true
				l.mu.Unlock()
			}
		}()
	}
	for r := range readers {
		rng := rand.New(rand.NewPCG(l.Seed, uint64(200+r)))
		l.rwg.Add(1)
		go func() {
			defer l.rwg.Done()
			l.reader(len(pubs)+r, rng)
		}()
	}
}

// StopPublishers makes the publishers send no new message and waits until
// every one they sent was acknowledged.
func (l *SeqLoad) StopPublishers() { l.once[0].Do(func() { close(l.stopPub) }); l.pwg.Wait() }

// StopReaders stops the readers.
func (l *SeqLoad) StopReaders() { l.once[1].Do(func() { close(l.stopRead) }); l.rwg.Wait() }

// StopSubscribers stops the subscribers.
func (l *SeqLoad) StopSubscribers() { l.once[2].Do(func() { close(l.stopSub) }); l.wg.Wait() }

// Stop stops everything.
func (l *SeqLoad) Stop() {
	l.StopPublishers()
	l.StopReaders()
	l.StopSubscribers()
}

// Subscribers returns the subscribers' ids.
func (l *SeqLoad) Subscribers() []string { return l.subs }

// InOrder returns the publishers that never lost their access node.
func (l *SeqLoad) InOrder() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.pubs {
		if !l.moved[p] {
			out = append(out, p)
		}
	}
	return out
}

// Moved returns the publishers that lost their access node.
func (l *SeqLoad) Moved() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.pubs {
		if l.moved[p] {
			out = append(out, p)
		}
	}
	return out
}

// LostSessions returns the subscribers whose persistent session was not
// present when they reconnected after their node restarted.
func (l *SeqLoad) LostSessions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lostSession)
}

func (l *SeqLoad) stopped(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// subscriber records what cl receives; when its connection ends (its node
// crashed) it resumes the session on the same node once it is back, with
// the same QoS 2 receiving state (recv).
func (l *SeqLoad) subscriber(i int, id string, cl *Client, recv *Receiver) {
	for {
		for alive := true; alive; {
			select {
			case m := <-cl.Msgs:
				l.Run.Received(id, m)
			case <-cl.Done:
				alive = false
			case <-l.stopSub:
				return
			}
		}
		for _, m := range cl.Pending() {
			l.Run.Received(id, m)
		}
		for cl = nil; cl == nil; {
			if !sleepOrStop(l.stopSub, l.Retry) {
				return
			}
			if !l.Target.Usable(i) {
				continue
			}
			next, err := l.Target.Connect(i, id, ConnectOptions{Resume: true, SessionExpiry: 3600, Receiver: recv})
			if err != nil {
				continue
			}
			if !next.Connack.SessionPresent {
				l.mu.Lock()
				l.lostSession = append(l.lostSession, id)
				l.mu.Unlock()
			}
			l.Run.Connected(id)
			cl = next
		}
	}
}

// publisher publishes to random topics of Topics from its node until
// StopPublishers, with a window in flight. When its connection ends (its
// node crashed) it connects through another usable node and sends what
// was not acknowledged again (recorded as AccessLost), then goes on. After
// the stop it still sends until everything it published is acknowledged.
// It reports whether it ever lost its access node.
func (l *SeqLoad) publisher(client int, id string, home int, qos byte, rng *rand.Rand) (lost bool) {
	var pending []string // to send (again), in the order first drawn
	topicOf := map[string]string{}
	seq := 0
	for attempt := 0; ; attempt++ {
		if l.stopped(l.stopPub) && len(pending) == 0 {
			return lost
		}
		cl := l.connectAny(id, home, attempt)
		if cl == nil {
			return lost
		}
		slots := make(chan struct{}, l.Window)
		var mu sync.Mutex
		var unacked []string
		var wg sync.WaitGroup
		dead := false
		for !dead {
			if len(pending) == 0 {
				if l.MaxPublishes > 0 && seq >= l.MaxPublishes {
					// Done: idle until the stop, keeping the connection.
					select {
					case <-l.stopPub:
					case <-cl.Done:
					}
				}
				if l.stopped(l.stopPub) {
					break
				}
				p := fmt.Sprintf("%s-%05d", id, seq)
				seq++
				topicOf[p] = l.Topics[rng.IntN(len(l.Topics))]
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
			l.Run.Attempt(client, id, topicOf[p], p, qos)
			_, res := cl.PublishAsync(topicOf[p], qos, p, 0)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := <-res
				if r.Err == nil && r.Code == packet.Success {
					l.Run.Acked(p)
				} else {
					mu.Lock()
					unacked = append(unacked, p)
					mu.Unlock()
				}
				<-slots
			}()
			time.Sleep(l.Gap) // lint:sleep-ok the publisher's pace (fake time in a bubble)
		}
		wg.Wait()
		select {
		case <-cl.Done:
			lost = true
			l.Run.AccessLost(unacked)
		default:
			cl.Close() // refused publishes (not a lost connection) go again too
		}
		pending = append(unacked, pending...)
		slices.SortFunc(pending, strings.Compare) // zero-padded: the order drawn
	}
}

// connectAny connects id to node home if it is usable, else to another
// usable node (from the next one on, attempt being the publisher's
// connection count), retrying until one accepts or the subscribers stop.
func (l *SeqLoad) connectAny(id string, home, attempt int) *Client {
	nodes := l.Target.Nodes()
	for try := 0; ; try++ {
		i := (home + try) % nodes
		if attempt > 0 {
			i = (home + attempt + try) % nodes
		}
		if l.Target.Usable(i) {
			if cl, err := l.Target.Connect(i, id, ConnectOptions{}); err == nil {
				return cl
			}
		}
		if !sleepOrStop(l.stopSub, l.Retry) {
			return nil
		}
	}
}

// reader reads the topics' history through random usable nodes until
// StopReaders: latest(), and index reads around the latest it saw,
// recording each with its outcome. Failed reads are left out: they
// observed nothing.
func (l *SeqLoad) reader(client int, rng *rand.Rand) {
	seen := map[string]uint64{}
	lin := l.Run.Lin
	for sleepOrStop(l.stopRead, l.ReadGap) {
		i := rng.IntN(l.Target.Nodes())
		if !l.Target.Usable(i) {
			continue
		}
		topic := l.Topics[rng.IntN(len(l.Topics))]
		latestOnly := rng.IntN(3) == 0
		idx := uint64(max(int(seen[topic])-4, 1) + rng.IntN(8))
		limit := 1
		if latestOnly {
			idx = seen[topic] + 1 // the records do not matter: the latest does
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		call := lin.Now()
		recs, latest, note, err := l.Target.Records(ctx, i, topic, idx, limit)
		cancel()
		if err != nil {
			continue
		}
		note = fmt.Sprintf("via %s: %s", nodeName(i), note)
		seen[topic] = max(seen[topic], latest)
		switch {
		case latestOnly:
			lin.Latest(client, topic, call, latest, note)
		case len(recs) == 0:
			lin.Read(client, topic, idx, call, false, "", note)
		case recs[0].Index == idx:
			lin.Read(client, topic, idx, call, true, recs[0].Payload, note)
		default:
			// A record other than the one asked for is a wrong answer.
			lin.Read(client, topic, idx, call, true, fmt.Sprintf("<index %d: %s>", recs[0].Index, recs[0].Payload), note)
		}
	}
}

// ReadSeqLogs reads every topic's whole log through node i, checking that
// its indexes are gap-free from 1.
func ReadSeqLogs(target SeqTarget, i int, topics []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, topic := range topics {
		var log []string
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			recs, latest, _, err := target.Records(ctx, i, topic, uint64(len(log)+1), 1000)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s from %d: %w", topic, len(log)+1, err)
			}
			for _, r := range recs {
				if r.Index != uint64(len(log)+1) {
					return nil, fmt.Errorf("%s: index %d after %d: the log has a gap", topic, r.Index, len(log))
				}
				log = append(log, r.Payload)
			}
			if len(recs) == 0 || uint64(len(log)) >= latest {
				if uint64(len(log)) != latest {
					return nil, fmt.Errorf("%s: read %d records, latest is %d", topic, len(log), latest)
				}
				break
			}
		}
		out[topic] = log
	}
	return out, nil
}

// DescribeLogs summarises logs for a test's output.
func DescribeLogs(logs map[string][]string) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(logs)) {
		parts = append(parts, fmt.Sprintf("%s %d records", t, len(logs[t])))
	}
	return strings.Join(parts, ", ")
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

// ConnectConn runs the MQTT 5 CONNECT exchange on conn (a connection the
// caller dialled, to a node in another process for instance) and returns
// the client; it is closed at the end of the test.
func ConnectConn(t testing.TB, conn net.Conn, id string, o ConnectOptions) (*Client, error) {
	cl, err := connect(t, conn, id, o)
	if cl != nil && err == nil {
		t.Cleanup(func() { _ = cl.conn.Close(); <-cl.Done })
	}
	return cl, err
}

// SeqTarget returns the cluster as a target of the checker's clients:
// clients connect from a node's own host, history reads are the node's
// linearizable reads (Node.ReadLinearizable: at the group's leader after
// a barrier, what the admin API serves by default).
func (c *Cluster) SeqTarget() SeqTarget { return memTarget{c} }

type memTarget struct{ c *Cluster }

func (m memTarget) Nodes() int { return len(m.c.nodes) }

func (m memTarget) Usable(i int) bool {
	n := m.c.nodes[i]
	return n.Running() && !m.c.Net.Stalled(n.Host)
}

func (m memTarget) Connect(i int, id string, o ConnectOptions) (*Client, error) {
	return m.c.nodes[i].TryConnect(id, o)
}

func (m memTarget) Records(ctx context.Context, i int, topic string, from uint64, limit int) ([]SeqRecord, uint64, string, error) {
	n := m.c.nodes[i].Current()
	if n == nil {
		return nil, 0, "", errors.New("not running")
	}
	tl, recs, err := n.ReadLinearizable(ctx, topic, from, limit)
	note := "served by " + tl.ServedBy
	switch {
	case errors.Is(err, adminapi.ErrUnknownTopic):
		return nil, 0, note + ": unknown topic", nil
	case err != nil:
		return nil, 0, note, err
	}
	out := make([]SeqRecord, len(recs))
	for k, r := range recs {
		out[k] = SeqRecord{Index: r.Index, Payload: r.Payload}
	}
	return out, tl.Latest, fmt.Sprintf("%s (latest %d)", note, tl.Latest), nil
}
