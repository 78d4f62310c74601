package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
)

// serveProc is one `sextant serve` process of a rolling restart, restarted
// with the same arguments and data directory.
type serveProc struct {
	t    *testing.T
	bin  string
	id   string
	ip   string
	args []string
	log  string

	cmd  *exec.Cmd
	done chan error
}

func (p *serveProc) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd = exec.Command(p.bin, append([]string{"serve"}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan error, 1)
	p.done = done
	go func() { done <- p.cmd.Wait(); f.Close() }()
}

// exited waits for the process to end by itself and fails unless it exited
// with status 0.
func (p *serveProc) exited(within time.Duration) {
	p.t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("%s exited with %v", p.id, err)
		}
	case <-time.After(within):
		p.t.Fatalf("%s did not exit within %v", p.id, within)
	}
}

// processIPs are the loopback addresses the process tests' nodes run on.
var processIPs = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// startThreeProcs starts three `sextant serve` processes, n1 to n3 on
// processIPs with the same ports and extra flags: n1 bootstraps the
// cluster, n2 and n3 join through the addresses join(i) gives. When the
// test ends they are let go (if a test stopped them) and killed, and their
// logs printed if it failed.
func startThreeProcs(t *testing.T, bin, mqttPort, clusterPort, adminPort string, extra []string, join func(i int) []string) []*serveProc {
	t.Helper()
	procs := threeProcs(t, bin, mqttPort, clusterPort, adminPort, extra, join)
	for _, p := range procs {
		p.start()
	}
	return procs
}

// threeProcs is startThreeProcs without the start: the test starts them
// in the order it needs.
func threeProcs(t *testing.T, bin, mqttPort, clusterPort, adminPort string, extra []string, join func(i int) []string) []*serveProc {
	t.Helper()
	data := t.TempDir()
	var procs []*serveProc
	for i, ip := range processIPs {
		id := fmt.Sprintf("n%d", i+1)
		args := append([]string{"--node-id", id, "--data-dir", filepath.Join(data, id), "--cluster-addr", ip + ":" + clusterPort,
			"--mqtt-addr", ip + ":" + mqttPort, "--ws-addr", "", "--admin-addr", ip + ":" + adminPort, "--log-format", "text"}, extra...)
		if i > 0 {
			args = append(args, "--join", strings.Join(join(i), ","))
		}
		procs = append(procs, &serveProc{t: t, bin: bin, id: id, ip: ip, args: args, log: filepath.Join(data, id+".log")})
	}
	t.Cleanup(func() {
		for _, p := range procs {
			if p.cmd != nil && p.cmd.Process != nil && p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
			}
			p.kill()
		}
		if t.Failed() {
			for _, p := range procs {
				b, _ := os.ReadFile(p.log)
				t.Logf("%s log:\n%s", p.id, b)
			}
		}
	})
	return procs
}

func (p *serveProc) kill() {
	if p.cmd != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// TestRollingRestartUnderLoad restarts each node of a three-node cluster
// in turn (real processes on 127.0.0.1-3) while three publishers send
// QoS 1 messages steadily and three subscribers with persistent sessions
// receive them all. Two nodes are drained with `sextant node drain`, one
// with SIGTERM; each drain sends its clients away (MQTT 5 Use Another
// Server), and they reconnect to the next node in their list, which takes
// their session over. Every acknowledged message must reach every
// subscriber; the longest pause a subscriber saw is reported.
func TestRollingRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts three sextant processes under load")
	}
	bin := brokertest.BuildSextant(t)
	mqttPort, clusterPort, adminPort := freePortOnAll(t, false), freePortOnAll(t, true), freePortOnAll(t, false)
	ips := processIPs
	// The first node bootstraps the cluster; the others join through any
	// node (on a restart, a node finds the others it remembers).
	procs := startThreeProcs(t, bin, mqttPort, clusterPort, adminPort,
		[]string{"--fsync", "never", "--drain-timeout", "20s", "--shutdown-timeout", "40s"},
		func(i int) []string { return []string{ips[0] + ":" + clusterPort, ips[3-i] + ":" + clusterPort} })
	admin := func(ip string) string { return "http://" + ip + ":" + adminPort }
	converged := func(what string) {
		t.Helper()
		admins := []string{admin(ips[0]), admin(ips[1]), admin(ips[2])}
		brokertest.Eventually(t, 90*time.Second, func() bool {
			if !aliveEverywhere(admins, 3) {
				return false
			}
			for _, a := range admins {
				var ci adminapi.ClusterInfo
				if getJSON(a+"/readyz", &map[string]string{}) != nil || getJSON(a+"/v1/cluster", &ci) != nil || ci.Leader == "" || len(ci.Servers) != 3 {
					return false
				}
			}
			return true
		}, what)
	}
	converged("three ready nodes that see each other, with a metadata leader")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	addr := func(i int) string { return ips[i%3] + ":" + mqttPort }
	rotate := func(first int) []string { return []string{addr(first), addr(first + 1), addr(first + 2)} }

	var subs []*roamer
	var inboxes []*inbox
	for i := range 3 {
		in := newInbox()
		s := &roamer{t: t, id: fmt.Sprintf("roll-sub-%d", i+1), addrs: rotate(i), filter: "roll/#", onMsg: in.add}
		s.start(ctx, 0)
		subs, inboxes = append(subs, s), append(inboxes, in)
	}
	var pubs []*roamer
	for i := range 3 {
		p := &roamer{t: t, id: fmt.Sprintf("roll-pub-%d", i+1), addrs: rotate(i)}
		p.start(ctx, 0)
		pubs = append(pubs, p)
	}
	// Interest reaches every node a round trip after SUBACK: probe until
	// each publisher's message reaches each subscriber.
	for i, p := range pubs {
		probe := fmt.Sprintf("probe-%d", i)
		brokertest.Eventually(t, 30*time.Second, func() bool {
			if err := p.publish(ctx, "roll/probe", probe); err != nil {
				t.Fatal(err)
			}
			for _, in := range inboxes {
				if len(in.missing([]string{probe})) > 0 {
					return false
				}
			}
			return true
		}, "probes reach every subscriber")
	}

	followCtx, stopFollowing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() { defer wg.Done(); s.follow(followCtx) }()
	}
	defer func() { stopFollowing(); wg.Wait() }()
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	sent := make([]*acked, len(pubs))
	pubErr := make(chan error, len(pubs))
	var pubWG sync.WaitGroup
	for i, p := range pubs {
		sent[i] = &acked{}
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			tick := time.NewTicker(5 * time.Millisecond) // a steady 200 messages per second per publisher
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-trafficCtx.Done():
					return
				case <-tick.C:
				}
				payload := fmt.Sprintf("p%d-%d", i+1, n)
				if err := p.publish(trafficCtx, fmt.Sprintf("roll/p%d", i+1), payload); err != nil {
					if trafficCtx.Err() == nil {
						pubErr <- err
					}
					return
				}
				sent[i].add(payload)
			}
		}()
	}
	total := func() int {
		n := 0
		for _, a := range sent {
			l, _ := a.list()
			n += len(l)
		}
		return n
	}
	moreTraffic := func(k int, what string) {
		t.Helper()
		base := total()
		brokertest.Eventually(t, 60*time.Second, func() bool { return total() >= base+k }, what)
	}
	moreTraffic(300, "traffic before the restarts")

	start := time.Now()
	for i, p := range procs {
		began := time.Now()
		if i == 1 {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: SIGTERM", p.id)
		} else {
			out, err := exec.Command(bin, "node", "drain", "--admin", p.ip+":"+adminPort).CombinedOutput()
			if err != nil {
				t.Fatalf("sextant node drain %s: %v\n%s", p.id, err, out)
			}
			t.Logf("%s: %s", p.id, strings.TrimSpace(string(out)))
		}
		p.exited(90 * time.Second)
		stopped := time.Now()
		p.start()
		converged(p.id + " back and the cluster whole again")
		t.Logf("%s: stopped after %v, back and converged after %v more", p.id, stopped.Sub(began).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
		moreTraffic(300, "traffic after restarting "+p.id)
	}
	t.Logf("rolling restart of three nodes took %v", time.Since(start).Round(time.Millisecond))

	stopTraffic()
	pubWG.Wait()
	select {
	case err := <-pubErr:
		t.Fatalf("a publisher failed: %v", err)
	default:
	}
	var want []string
	var pubGap time.Duration
	for _, a := range sent {
		l, g := a.list()
		want = append(want, l...)
		pubGap = max(pubGap, g)
	}
	for i, in := range inboxes {
		awaitDelivered(t, in, want, 60*time.Second)
		hops, lost := subs[i].summary()
		gap, around, dups := in.gap()
		t.Logf("%s: all %d acknowledged messages received; %d duplicates; longest pause %v (ending %v into the restarts); hops %v",
			subs[i].id, len(want), dups, gap.Round(time.Millisecond), around.Sub(start).Round(time.Millisecond), hops)
		if lost > 0 {
			t.Errorf("%s found no session on %d of its reconnections", subs[i].id, lost)
		}
	}
	for _, p := range pubs {
		hops, _ := p.summary()
		t.Logf("%s hops: %v", p.id, hops)
		p.close()
	}
	t.Logf("publishers' longest wait between two acknowledgements: %v", pubGap.Round(time.Millisecond))
}
