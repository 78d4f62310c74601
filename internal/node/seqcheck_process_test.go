package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/clustertest"
)

// TestProcessSequencedChecker is issue 14's checker on real processes:
// three `sextant serve` processes, a sequenced rule with replicas 3 over
// two topics, QoS 1 and 2 publishers on every node and a persistent
// subscriber on every node over MQTT, two readers of the history over
// HTTP (GET /v1/topics/{topic}/messages, from the leader), under a seeded
// schedule (SEXTANT_TEST_SEED, default 1; SEXTANT_SEQCHECK_STEPS faults,
// default 4) of kill -9 (then a restart from the data directory),
// SIGSTOP/SIGCONT and, with network namespaces, partitions (iptables in a
// node's namespace, as scripts/partial-partition.sh). Then the checks of
// the in-process checker (clustertest.SeqRun.Verify and porcupine over the
// publishes and the HTTP reads).
//
// With root, iproute2 and iptables each node runs in a network namespace
// of its own (10.214.0.x on a bridge in a namespace of its own; the test
// reaches a node from inside its namespace); without them (or with
// SEXTANT_SEQCHECK_LOOPBACK set) the nodes run on 127.0.0.1-3 and the
// schedule has no partitions (said in the log; a failure under CI=true).
// At the end every node's replica (read=local) must hold the leader's
// logs.
func TestProcessSequencedChecker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sextant processes under a fault schedule for about 30 s")
	}
	seed := uint64(1)
	if s := os.Getenv("SEXTANT_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SEXTANT_TEST_SEED: %v", err)
		}
		seed = v
	}
	steps := 4
	if s := os.Getenv("SEXTANT_SEQCHECK_STEPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("SEXTANT_SEQCHECK_STEPS=%q: want a positive integer", s)
		}
		steps = v
	}
	t.Logf("seed %d (set SEXTANT_TEST_SEED to change it), %d faults", seed, steps)
	bin := brokertest.BuildSextant(t)
	c := newProcCluster(t, bin)
	kinds := []string{"crash", "stall"}
	if c.netns {
		kinds = append(kinds, "isolate", "partition")
	} else {
		msg := "no network namespaces (they need root, iproute2 and iptables; SEXTANT_SEQCHECK_LOOPBACK turns them off): nodes on 127.0.0.1-3, the schedule has no partitions"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Log(msg)
	}
	rng := rand.New(rand.NewPCG(seed, 14))
	sched := clustertest.FaultSchedule(rng, kinds, 3, steps, 2*time.Second)
	for i, s := range sched {
		t.Logf("schedule step %d: %v", i+1, s)
	}
	c.start()
	c.setPolicy(`{"rules":[{"match":"chk/#","mode":"sequenced","replicas":3}]}`)

	run := clustertest.NewSeqRun()
	topics := []string{"chk/a", "chk/b"}
	load := &clustertest.SeqLoad{T: t, Target: c, Run: run, Topics: topics, Filter: "chk/#", Seed: seed,
		Window: 8, Gap: 20 * time.Millisecond, ReadGap: 15 * time.Millisecond, Retry: 100 * time.Millisecond, MaxPublishes: 400}
	defer load.Stop()
	load.Start([]clustertest.PubSpec{{Node: 0, QoS: 1}, {Node: 1, QoS: 2}, {Node: 2, QoS: 1}, {Node: 2, QoS: 2}}, 2)
	time.Sleep(500 * time.Millisecond) // lint:sleep-ok traffic before the first fault
	for i, s := range sched {
		t.Logf("step %d: %v", i+1, s)
		switch s.Kind {
		case "crash":
			c.procs[s.Node].kill9()
		case "stall":
			c.procs[s.Node].signal(syscall.SIGSTOP)
		case "isolate":
			for j := range 3 {
				if j != s.Node {
					c.cut(s.Node, j, true)
				}
			}
		case "partition":
			c.cut(s.Node, s.Other, true)
		}
		time.Sleep(s.Hold) // lint:sleep-ok the fault's length, from the seed
		switch s.Kind {
		case "crash":
			c.procs[s.Node].start()
			c.waitReady(s.Node)
		case "stall":
			c.procs[s.Node].signal(syscall.SIGCONT)
		case "isolate":
			for j := range 3 {
				if j != s.Node {
					c.cut(s.Node, j, false)
				}
			}
		case "partition":
			c.cut(s.Node, s.Other, false)
		}
		time.Sleep(s.After) // lint:sleep-ok calm between faults, from the seed
	}
	for i := range 3 {
		c.waitReady(i)
	}
	load.StopPublishers()
	subs := load.Subscribers()
	for _, s := range subs {
		if !waitUntil(2*time.Minute, func() bool { return run.HasAll(s) }) {
			t.Errorf("%s: not every acknowledged publish within 2 minutes (the checks below say which)", s)
		}
	}
	load.StopReaders()
	var final map[string][]string
	var err error
	if !waitUntil(time.Minute, func() bool { final, err = clustertest.ReadSeqLogs(c, 0, topics); return err == nil }) {
		t.Fatalf("the final logs: %v", err)
	}
	for i := range 3 {
		// Every replica holds the leader's logs once it has caught up.
		local := localReads{c}
		var mine map[string][]string
		if !waitUntil(30*time.Second, func() bool {
			mine, err = clustertest.ReadSeqLogs(local, i, topics)
			return err == nil && slices.Equal(mine["chk/a"], final["chk/a"]) && slices.Equal(mine["chk/b"], final["chk/b"])
		}) {
			t.Errorf("n%d's replica (read=local) does not hold the leader's logs (%s) within 30 s: %s, %v",
				i+1, clustertest.DescribeLogs(final), clustertest.DescribeLogs(mine), err)
		}
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
		published, acked, resent, clustertest.DescribeLogs(final), run.Lin.Reads(), load.Moved())
	if t.Failed() {
		return
	}
	if err := run.Lin.CheckLinearizable(final, "", 2*time.Minute); errors.Is(err, clustertest.ErrNoVerdict) {
		t.Log(err) // not a violation: a history longer than the check could take
	} else if err != nil {
		t.Error(err)
		for _, s := range run.Lin.Stale(final, 10) {
			t.Errorf("stale read: %s", s)
		}
	} else {
		t.Logf("linearizable: %d operations (%d history reads)", len(run.Lin.History(final)), run.Lin.Reads())
	}
}

func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond) // lint:sleep-ok polling real processes
	}
	return true
}

// procCluster is three `sextant serve` processes, in network namespaces
// of their own when it may (netns), else on 127.0.0.1-3. It is the
// checker's clustertest.SeqTarget.
type procCluster struct {
	t     *testing.T
	bin   string
	netns bool
	id    string // this run's namespace prefix
	ip    string // the ip command
	procs []*nsProc
	http  []*http.Client

	mqttPort, clusterPort, adminPort string
}

var _ clustertest.SeqTarget = (*procCluster)(nil)

// nsProc is one node's process, restarted with the same arguments.
type nsProc struct {
	c    *procCluster
	i    int
	args []string
	log  string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOP
}

const procNet = "10.214.0"

func newProcCluster(t *testing.T, bin string) *procCluster {
	c := &procCluster{t: t, bin: bin, id: fmt.Sprintf("sxq%d", os.Getpid())}
	c.netns = os.Getenv("SEXTANT_SEQCHECK_LOOPBACK") == "" && netnsUsable(t)
	if c.netns {
		c.ip, _ = exec.LookPath("ip")
		c.mqttPort, c.clusterPort, c.adminPort = "1883", "7946", "8088"
		c.setupNetns()
	} else {
		c.mqttPort, c.clusterPort, c.adminPort = freePortOnAll(t, false), freePortOnAll(t, true), freePortOnAll(t, false)
	}
	data := t.TempDir()
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		args := []string{"serve", "--node-id", id, "--data-dir", filepath.Join(data, id),
			"--cluster-addr", c.nodeIP(i) + ":" + c.clusterPort, "--mqtt-addr", c.nodeIP(i) + ":" + c.mqttPort,
			"--ws-addr", "", "--admin-addr", c.adminIP(i) + ":" + c.adminPort, "--log-format", "text",
			"--allow-anonymous", "true", "--fsync", "never"}
		if i > 0 {
			args = append(args, "--join", c.nodeIP(0)+":"+c.clusterPort)
		}
		c.procs = append(c.procs, &nsProc{c: c, i: i, args: args, log: filepath.Join(data, id+".log")})
		c.http = append(c.http, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return c.dial(ctx, i, addr)
			},
		}})
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.signal(syscall.SIGCONT)
			p.kill9()
		}
		if t.Failed() {
			for _, p := range c.procs {
				b, _ := os.ReadFile(p.log)
				if len(b) > 20000 {
					b = b[len(b)-20000:]
				}
				t.Logf("%s log (tail):\n%s", p.args[2], b)
			}
		}
	})
	return c
}

// netnsUsable reports whether this process may create network namespaces
// and run iptables in them.
func netnsUsable(t *testing.T) bool {
	ip, err1 := exec.LookPath("ip")
	_, err2 := exec.LookPath("iptables")
	if err1 != nil || err2 != nil || os.Geteuid() != 0 {
		return false
	}
	ns := fmt.Sprintf("sxqprobe%d", os.Getpid())
	if err := exec.Command(ip, "netns", "add", ns).Run(); err != nil {
		return false
	}
	ok := exec.Command(ip, "netns", "exec", ns, "iptables", "-L", "-n").Run() == nil
	_ = exec.Command(ip, "netns", "del", ns).Run()
	return ok
}

func (c *procCluster) nodeIP(i int) string {
	if c.netns {
		return fmt.Sprintf("%s.%d", procNet, i+1)
	}
	return fmt.Sprintf("127.0.0.%d", i+1)
}

// adminIP: the namespace's own loopback (no token needed, no partition
// cuts it), or the node's loopback address.
func (c *procCluster) adminIP(i int) string {
	if c.netns {
		return "127.0.0.1"
	}
	return c.nodeIP(i)
}

func (c *procCluster) ns(i int) string { return fmt.Sprintf("%sn%d", c.id, i+1) }

func (c *procCluster) run(args ...string) {
	c.t.Helper()
	if out, err := exec.Command(c.ip, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// setupNetns builds the namespaces of scripts/partial-partition.sh: a
// bridge in a namespace of its own, each node's namespace joined to it by
// a veth pair. Nothing reaches a real network.
func (c *procCluster) setupNetns() {
	br := c.id + "br"
	c.t.Cleanup(func() {
		for i := range 3 {
			_ = exec.Command(c.ip, "netns", "del", c.ns(i)).Run()
		}
		_ = exec.Command(c.ip, "netns", "del", br).Run()
	})
	c.run("netns", "add", br)
	c.run("-n", br, "link", "add", "br0", "type", "bridge")
	c.run("-n", br, "link", "set", "br0", "up")
	for i := range 3 {
		ns, veth := c.ns(i), fmt.Sprintf("%se%d", c.id, i+1)
		c.run("netns", "add", ns)
		c.run("link", "add", veth, "netns", ns, "type", "veth", "peer", "name", fmt.Sprintf("p%d", i+1), "netns", br)
		c.run("-n", br, "link", "set", fmt.Sprintf("p%d", i+1), "master", "br0")
		c.run("-n", br, "link", "set", fmt.Sprintf("p%d", i+1), "up")
		c.run("-n", ns, "addr", "add", c.nodeIP(i)+"/24", "dev", veth)
		c.run("-n", ns, "link", "set", veth, "up")
		c.run("-n", ns, "link", "set", "lo", "up")
	}
}

// dial opens a TCP connection from inside node i's namespace (from this
// process otherwise): a goroutine locked to a thread that joins the
// namespace makes the socket, and the thread ends with it.
func (c *procCluster) dial(ctx context.Context, i int, addr string) (net.Conn, error) {
	if !c.netns {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, in the namespace, exits with the goroutine
		f, err := os.Open("/var/run/netns/" + c.ns(i))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", c.ns(i), err)}
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// cut cuts (or heals) nodes a and b apart, both ways, with iptables in
// a's namespace.
func (c *procCluster) cut(a, b int, on bool) {
	c.t.Helper()
	op := "-I"
	if !on {
		op = "-D"
	}
	for _, rule := range [][]string{{"INPUT", "-s", c.nodeIP(b)}, {"OUTPUT", "-d", c.nodeIP(b)}} {
		args := append([]string{"netns", "exec", c.ns(a), "iptables", op}, append(rule, "-j", "DROP")...)
		c.run(args...)
	}
}

func (c *procCluster) start() {
	c.t.Helper()
	for _, p := range c.procs {
		p.start()
	}
	for i := range c.procs {
		c.waitReady(i)
	}
}

// waitReady waits until node i accepts MQTT connections and sees the three
// nodes alive.
func (c *procCluster) waitReady(i int) {
	c.t.Helper()
	if !waitUntil(time.Minute, func() bool {
		var nodes []adminapi.NodeInfo
		if code, err := c.get(i, "/v1/nodes", &nodes); err != nil || code != http.StatusOK {
			return false
		}
		alive := 0
		for _, n := range nodes {
			if n.State == "alive" {
				alive++
			}
		}
		if alive < 3 {
			return false
		}
		conn, err := c.dial(context.Background(), i, c.nodeIP(i)+":"+c.mqttPort)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}) {
		c.t.Fatalf("n%d: not ready (three nodes alive, MQTT accepting) within a minute", i+1)
	}
}

func (c *procCluster) url(i int, path string) string {
	return "http://" + c.adminIP(i) + ":" + c.adminPort + path
}

// get reads a JSON answer into out (when 200).
func (c *procCluster) get(i int, path string, out any) (int, error) {
	resp, err := c.http[i].Get(c.url(i, path))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

// setPolicy puts the rules through node 1 and waits until every node has
// them.
func (c *procCluster) setPolicy(body string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPut, c.url(0, "/v1/policies"), bytes.NewBufferString(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http[0].Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var set adminapi.PolicySet
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &set) != nil {
		c.t.Fatalf("PUT /v1/policies: %s: %s", resp.Status, b)
	}
	for i := range 3 {
		if !waitUntil(30*time.Second, func() bool {
			var got adminapi.PolicySet
			code, err := c.get(i, "/v1/policies", &got)
			return err == nil && code == http.StatusOK && got.Version >= set.Version
		}) {
			c.t.Fatalf("n%d did not get the policy", i+1)
		}
	}
}

// Nodes implements clustertest.SeqTarget.
func (c *procCluster) Nodes() int { return 3 }

// Usable: the process runs and is not stopped.
func (c *procCluster) Usable(i int) bool {
	p := c.procs[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.stopped {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Connect connects an MQTT 5 client to node i from its namespace.
func (c *procCluster) Connect(i int, id string, o clustertest.ConnectOptions) (*clustertest.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.dial(ctx, i, c.nodeIP(i)+":"+c.mqttPort)
	if err != nil {
		return nil, err
	}
	// A stopped process completes no CONNECT: bound the exchange.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	cl, err := clustertest.ConnectConn(c.t, conn, id, o)
	if err == nil {
		_ = conn.SetDeadline(time.Time{})
	}
	return cl, err
}

// Records reads over HTTP: GET /v1/topics/{topic}/messages, linearizable
// (read=linearizable, the default).
func (c *procCluster) Records(ctx context.Context, i int, topic string, from uint64, limit int) ([]clustertest.SeqRecord, uint64, string, error) {
	return c.records(ctx, i, topic, from, limit, "")
}

// localReads is the cluster whose history reads are each node's own
// replica's (read=local): for comparing the replicas with the leader.
type localReads struct{ *procCluster }

func (l localReads) Records(ctx context.Context, i int, topic string, from uint64, limit int) ([]clustertest.SeqRecord, uint64, string, error) {
	return l.records(ctx, i, topic, from, limit, "&read=local")
}

func (c *procCluster) records(ctx context.Context, i int, topic string, from uint64, limit int, query string) ([]clustertest.SeqRecord, uint64, string, error) {
	path := fmt.Sprintf("/v1/topics/%s/messages?from=%d&limit=%d%s", url.PathEscape(topic), from, limit, query)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(i, path), nil)
	if err != nil {
		return nil, 0, "", err
	}
	resp, err := c.http[i].Do(req)
	if err != nil {
		return nil, 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, "", err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, 0, "unknown topic", nil
	default:
		return nil, 0, "", fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	var page adminapi.LogPage
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, 0, "", err
	}
	out := make([]clustertest.SeqRecord, len(page.Messages))
	for k, m := range page.Messages {
		out[k] = clustertest.SeqRecord{Index: m.Index, Payload: m.Payload}
	}
	return out, page.Latest, fmt.Sprintf("served by %s (latest %d)", page.ServedBy, page.Latest), nil
}

func (p *nsProc) start() {
	p.c.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.c.t.Fatal(err)
	}
	var cmd *exec.Cmd
	if p.c.netns {
		// ip netns exec execs the program: the process is sextant's.
		cmd = exec.Command(p.c.ip, append([]string{"netns", "exec", p.c.ns(p.i), p.c.bin}, p.args...)...)
	} else {
		cmd = exec.Command(p.c.bin, p.args...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		p.c.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done, p.stopped = cmd, done, false
	p.mu.Unlock()
}

// kill9 kills the process with SIGKILL and waits for it (if it runs).
func (p *nsProc) kill9() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

func (p *nsProc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.c.t.Errorf("signal %v to n%d: %v", sig, p.i+1, err)
	}
	p.stopped = sig == syscall.SIGSTOP
}
