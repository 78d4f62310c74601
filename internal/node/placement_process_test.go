package node_test

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// TestProcessPlacementFollowsClients is live placement end to end on
// three `sextant serve` processes (scripts/three-nodes.sh): the nodes
// stand at pinned coordinates (placement-coordinate; on one machine every
// measured RTT is loopback's), n1 at 0,0, n2 at 30,30 and n3 at 40,0 ms,
// so n3 is 40 ms from n1. The group of pl/t (sequenced, one replica,
// latency_ms 10) is created on n1 by a first publish there; then a
// subscriber and a streaming QoS 1 publisher connect to n3. E(t) through
// n1 is about 40 ms, over the 10 ms of Lth: within a few placement
// intervals (250 ms, 2 confirming rounds) the metadata leader's placement
// manager decides a move to n3 (reason violation), n1's migration
// executor hands the group over, and GET /v1/placement shows n3 as home
// with E(t) under Lth. Every message arrives once and in order, and
// neither client connects more than once.
func TestProcessPlacementFollowsClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sextant processes")
	}
	mq := brokertest.RequireMosquitto(t)
	const interval = 250 * time.Millisecond
	_, _, mqttPort, adminPort := startThreeNodes(t, "info",
		fmt.Sprintf("NODE_ARGS=--placement-interval %v --placement-confirm 2 --placement-cooldown 1s", interval),
		"N1_ARGS=--placement-coordinate 0,0", "N2_ARGS=--placement-coordinate 30,30", "N3_ARGS=--placement-coordinate 40,0")
	admin := func(ip string) string { return "http://" + ip + ":" + adminPort }
	brokertest.Eventually(t, 60*time.Second, func() bool {
		return aliveEverywhere([]string{admin("127.0.0.1"), admin("127.0.0.2"), admin("127.0.0.3")}, 3)
	}, "three nodes alive in every node's view")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ps, err := client.New("127.0.0.1:"+adminPort, "").PutPolicies(ctx,
		[]fsm.Rule{{Match: "pl/#", Mode: fsm.Sequenced, Replicas: 1, LatencyMS: 10}}, nil)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool { // n1 and n3 take the clients
		for _, ip := range []string{"127.0.0.1", "127.0.0.3"} {
			var got adminapi.PolicySet
			if getJSON(admin(ip)+"/v1/policies", &got) != nil || got.Version < ps.Version {
				return false
			}
		}
		return true
	}, "the policy on n1 and n3")

	// The placement as n2 (which asks the metadata leader) shows it.
	placement := func() (adminapi.PlacementInfo, adminapi.PlacementGroup) {
		t.Helper()
		var pi adminapi.PlacementInfo
		if err := getJSON(admin("127.0.0.2")+"/v1/placement", &pi); err != nil {
			t.Fatalf("GET /v1/placement: %v", err)
		}
		for _, g := range pi.Groups {
			if g.Rule == "pl/#" {
				return pi, g
			}
		}
		return pi, adminapi.PlacementGroup{}
	}
	// poll asks cond every 50 ms until it holds or d passes.
	poll := func(d time.Duration, cond func() bool, what string) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(d)
		for !cond() {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("not within %v: %s", d, what)
			}
		}
	}

	// The first publish, on n1, creates the group there: a new group is
	// homed at its first publisher's node once that node is registered
	// (else elsewhere: it is then moved to n1 by hand).
	brokertest.Eventually(t, 30*time.Second, func() bool {
		var ci adminapi.ClusterInfo
		if getJSON(admin("127.0.0.1")+"/v1/cluster", &ci) != nil {
			return false
		}
		voters := 0
		for _, s := range ci.Servers {
			if s.Voter {
				voters++
			}
		}
		return voters == 3 && len(ci.Registered) == 3
	}, "three metadata voters, three registered nodes")
	if o, err := exec.Command(mq.Pub, "-h", "127.0.0.1", "-p", mqttPort, "-t", "pl/t", "-q", "1", "-m", "create").CombinedOutput(); err != nil {
		t.Fatalf("first publish: %v: %s", err, o)
	}
	var created adminapi.PlacementGroup
	poll(10*time.Second, func() bool { _, created = placement(); return created.Group != "" }, "the group in GET /v1/placement")
	if created.Home != "n1" {
		t.Logf("group %s created on %s; moving it to n1", created.Group, created.Home)
		if _, err := client.New("127.0.0.1:"+adminPort, "").Move(ctx, adminapi.MoveRequest{Topic: "pl/t", To: "n1", Timeout: "20s"}); err != nil {
			t.Fatalf("move to n1: %v", err)
		}
	}

	// A subscriber on n1 holds the home there until the stream starts:
	// a subscriber alone on n3 would already pull the home to it.
	actx, stopAnchor := context.WithCancel(ctx)
	defer stopAnchor()
	anchor := exec.CommandContext(actx, mq.Sub, "-h", "127.0.0.1", "-p", mqttPort, "-t", "pl/#", "-q", "1", "-i", "pl-anchor")
	if err := anchor.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stopAnchor(); _ = anchor.Wait() }()
	poll(10*time.Second, func() bool { _, g := placement(); return g.Consumers >= 1 }, "the subscriber on n1 in a placement round")

	// The subscriber on n3; -d prints its CONNECTs (lines "Client ...").
	sub := exec.CommandContext(ctx, mq.Sub, "-d", "-h", "127.0.0.3", "-p", mqttPort, "-t", "pl/#", "-q", "1", "-i", "pl-sub")
	out, err := sub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = sub.Wait() }()
	got := make(chan string, 100000)
	var subConnects atomic.Int32
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "Client ") || strings.HasPrefix(l, "Subscribed (mid") { // -d's lines
				if strings.Contains(l, "sending CONNECT") {
					subConnects.Add(1)
				}
				continue
			}
			got <- l
		}
		close(got)
	}()
	// Probes through n1 until one arrives: the subscription is in place.
	// (With subscribers at n1 and n3 and the probes' publisher at n1, no
	// node does better than n1.)
	for i := 0; ; i++ {
		if o, err := exec.Command(mq.Pub, "-h", "127.0.0.1", "-p", mqttPort, "-t", "pl/t", "-q", "1", "-m", fmt.Sprintf("probe-%d", i)).CombinedOutput(); err != nil {
			t.Fatalf("probe: %v: %s", err, o)
		}
		select {
		case l := <-got:
			t.Logf("probe %d sent, %q received", i, l)
		case <-time.After(time.Second):
			if i < 30 {
				continue
			}
			t.Fatal("no probe reached the subscriber")
		}
		break
	}
	for drained := false; !drained; {
		select {
		case l := <-got:
			if !strings.HasPrefix(l, "probe-") && l != "create" {
				t.Fatalf("unexpected message %q before the stream", l)
			}
		case <-time.After(300 * time.Millisecond):
			drained = true
		}
	}
	if _, g := placement(); g.Home != "n1" {
		t.Fatalf("the group moved to %s before the stream started", g.Home)
	}

	// One publisher connection on n3, a QoS 1 message every 5 ms until
	// told to stop.
	pub := exec.CommandContext(ctx, mq.Pub, "-d", "-h", "127.0.0.3", "-p", mqttPort, "-t", "pl/t", "-q", "1", "-i", "pl-pub", "-l")
	stdin, err := pub.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var pubOut brokertest.LockedBuffer
	pub.Stdout, pub.Stderr = &pubOut, &pubOut
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		defer stdin.Close()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				sent <- i
				return
			case <-tick.C:
			}
			if _, err := fmt.Fprintf(stdin, "m-%05d\n", i); err != nil {
				sent <- i
				return
			}
		}
	}()
	stopped := false
	stopPub := func() int {
		if !stopped {
			close(stop)
			stopped = true
		}
		return <-sent
	}
	defer func() {
		if !stopped {
			stopPub()
		}
	}()

	// Once the stream flows, the subscriber on n1 leaves: the group's
	// clients are all at n3.
	select {
	case l := <-got:
		if l != "m-00000" {
			t.Fatalf("first message of the stream: %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's first message never arrived")
	}
	stopAnchor()

	// The home follows the clients to n3.
	var decided time.Duration
	var decision *adminapi.PlacementDecision
	var moved adminapi.PlacementGroup
	maxEt := 0.0
	poll(20*time.Second, func() bool {
		_, g := placement()
		if g.Home == "n1" && g.EtMs > maxEt {
			maxEt = g.EtMs
			t.Logf("%v after the stream started: E(t) %.1f ms on n1, Lth %.0f ms, violated %v", time.Since(start).Round(time.Millisecond), g.EtMs, g.LthMs, g.Violated)
		}
		if g.Pending != nil && decision == nil {
			decided, decision = time.Since(start), g.Pending
			t.Logf("decision seen %v after the stream started: %s, reason %s", decided.Round(time.Millisecond), g.Pending.Home, g.Pending.Reason)
		}
		moved = g
		return g.Home != "n1" && g.Pending == nil
	}, "the group's home moves away from n1")
	took := time.Since(start)
	t.Logf("homed on %s %v after the stream started (%.1f placement intervals), last move %+v", moved.Home, took.Round(time.Millisecond),
		float64(took)/float64(interval), moved.LastMove)
	if moved.Home != "n3" || moved.LastMove == nil || moved.LastMove.Reason != string(fsm.ReasonMigration) {
		t.Fatalf("group %s: home %s, last move %+v; want n3 by a migration", moved.Group, moved.Home, moved.LastMove)
	}
	if decision != nil && (decision.Home != "n3" || decision.Reason != string(fsm.ReasonViolation)) {
		t.Fatalf("decision %+v, want n3 for a violation", decision)
	}
	if took > 40*interval {
		t.Errorf("the home moved %v after the clients came, more than 40 placement intervals", took)
	}
	// A later round sees it within Lth.
	poll(10*time.Second, func() bool {
		pi, g := placement()
		return pi.At.After(start.Add(took)) && g.Monitored && !g.Violated && g.EtMs <= g.LthMs
	}, "E(t) under Lth on the new home")

	// Traffic goes on after the move, then stops.
	time.Sleep(500 * time.Millisecond) // lint:sleep-ok real processes: traffic after the move
	n := stopPub()
	if err := pub.Wait(); err != nil {
		t.Fatalf("mosquitto_pub: %v: %s", err, pubOut.String())
	}
	for i := 1; i < n; i++ {
		want := fmt.Sprintf("m-%05d", i)
		select {
		case l := <-got:
			if l != want {
				t.Fatalf("message %d: got %q, want %q", i, l, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("message %d (%s) never arrived", i, want)
		}
	}
	select {
	case l := <-got:
		t.Fatalf("extra message %q after the stream", l)
	case <-time.After(300 * time.Millisecond):
	}
	if c := strings.Count(pubOut.String(), "sending CONNECT"); c != 1 {
		t.Fatalf("the publisher connected %d times:\n%s", c, pubOut.String())
	}
	if c := subConnects.Load(); c != 1 {
		t.Fatalf("the subscriber connected %v times", c)
	}
	t.Logf("%d QoS 1 messages, each received once and in order; one connection per client", n)

	// The migration, as any node lists it: n1 ran it, for a violation.
	var migs adminapi.MigrationList
	if err := getJSON(admin("127.0.0.2")+"/v1/migrations", &migs); err != nil {
		t.Fatal(err)
	}
	if len(migs.Nodes) != 3 || len(migs.Unanswered) != 0 {
		t.Fatalf("GET /v1/migrations on n2: nodes %v, unanswered %v", migs.Nodes, migs.Unanswered)
	}
	var found bool
	for _, m := range migs.Migrations {
		t.Logf("GET /v1/migrations on n2: %s ran %s %s -> %s (%s, %s) %s: total %.1f ms, pause %.1f ms", m.Node, m.Group, m.From, m.To,
			m.Reason, m.Kind, m.State, m.TotalSeconds*1000, m.PauseSeconds*1000)
		if m.Group == moved.Group && m.Node == "n1" && m.From == "n1" && m.To == "n3" && m.Reason == string(fsm.ReasonViolation) && m.State == "done" {
			found = true
		}
	}
	if !found {
		t.Fatalf("GET /v1/migrations on n2 does not list n1's move of %s to n3 for a violation: %+v", moved.Group, migs.Migrations)
	}
}
