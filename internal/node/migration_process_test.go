package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// TestProcessTopicMoveUnderTraffic runs three `sextant serve` processes
// (scripts/three-nodes.sh), makes mv/# sequenced (one replica), and moves
// mv/t with `sextant topics move` twice (n1 to n2, then to n3) while
// mosquitto_pub streams QoS 1 messages to it through n1 on one connection
// and mosquitto_sub receives on n3: every message arrives once, in order,
// and the publisher never loses its connection (mosquitto_pub -l exits 0).
func TestProcessTopicMoveUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sextant processes")
	}
	mq := brokertest.RequireMosquitto(t)
	bin, _, mqttPort, adminPort := startThreeNodes(t, "info")
	admin := func(ip string) string { return ip + ":" + adminPort }
	brokertest.Eventually(t, 60*time.Second, func() bool {
		return aliveEverywhere([]string{"http://" + admin("127.0.0.1"), "http://" + admin("127.0.0.2"), "http://" + admin("127.0.0.3")}, 3)
	}, "three nodes alive in every node's view")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := client.New(admin("127.0.0.1"), "").PutPolicies(ctx, []fsm.Rule{{Match: "mv/#", Mode: fsm.Sequenced, Replicas: 1}}, nil); err != nil {
		t.Fatalf("policy: %v", err)
	}

	// The subscriber on n3.
	sub := exec.CommandContext(ctx, mq.Sub, "-h", "127.0.0.3", "-p", mqttPort, "-t", "mv/#", "-q", "1", "-i", "mv-sub")
	out, err := sub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = sub.Wait() }()
	got := make(chan string, 10000)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	// Probes through n1 until one arrives: the group exists (homed on
	// n1, where it was first published) and n3's feed follows it.
	for i := 0; ; i++ {
		if o, err := exec.Command(mq.Pub, "-h", "127.0.0.1", "-p", mqttPort, "-t", "mv/t", "-q", "1", "-m", fmt.Sprintf("probe-%d", i)).CombinedOutput(); err != nil {
			t.Fatalf("probe: %v: %s", err, o)
		}
		select {
		case <-got:
		case <-time.After(time.Second):
			if i < 30 {
				continue
			}
			t.Fatal("no probe reached the subscriber")
		}
		break
	}
	drain := func() {
		for {
			select {
			case l := <-got:
				if !strings.HasPrefix(l, "probe-") {
					t.Fatalf("unexpected message %q before the stream", l)
				}
			case <-time.After(500 * time.Millisecond):
				return
			}
		}
	}
	drain()

	// One publisher connection through n1, a message every 5 ms.
	pub := exec.CommandContext(ctx, mq.Pub, "-h", "127.0.0.1", "-p", mqttPort, "-t", "mv/t", "-q", "1", "-i", "mv-pub", "-l")
	stdin, err := pub.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var pubOut brokertest.LockedBuffer
	pub.Stdout, pub.Stderr = &pubOut, &pubOut
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	const n = 600
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stdin.Close()
		for i := range n {
			fmt.Fprintf(stdin, "m-%04d\n", i)
			time.Sleep(5 * time.Millisecond) // lint:sleep-ok the publisher's pace, real processes
		}
	}()
	move := func(to string) adminapi.MoveResult {
		t.Helper()
		start := time.Now()
		o, err := exec.Command(bin, "topics", "move", "mv/t", "--to", to, "--admin", admin("127.0.0.2"), "--timeout", "30s", "--json").Output()
		if err != nil {
			t.Fatalf("sextant topics move --to %s: %v: %s", to, err, o)
		}
		var res adminapi.MoveResult
		if err := json.Unmarshal(o, &res); err != nil || res.Home != to {
			t.Fatalf("sextant topics move --to %s: %v: %s", to, err, o)
		}
		t.Logf("sextant topics move mv/t --to %s: from %s, voters %v, epoch %d, %.0f ms (command: %v)", to, res.From, res.Voters, res.Epoch,
			res.Seconds*1000, time.Since(start).Round(time.Millisecond))
		return res
	}
	time.Sleep(800 * time.Millisecond) // lint:sleep-ok real processes: the stream runs before the moves
	// The group is homed where it was first published (or, by the
	// placement of new groups, elsewhere): move it to another node, then
	// to the third.
	res := move("n2")
	if res.From == res.Home { // it was there already
		res = move("n1")
	}
	third := "n1"
	for _, id := range []string{"n1", "n2", "n3"} {
		if id != res.From && id != res.Home {
			third = id
		}
	}
	time.Sleep(800 * time.Millisecond) // lint:sleep-ok real processes: traffic between the moves
	move(third)
	wg.Wait()
	if err := pub.Wait(); err != nil {
		t.Fatalf("mosquitto_pub: %v: %s", err, pubOut.String())
	}
	for i := range n {
		want := fmt.Sprintf("m-%04d", i)
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
	case <-time.After(500 * time.Millisecond):
	}
	// One node lists every node's migrations.
	var migs adminapi.MigrationList
	if err := getJSON("http://"+admin("127.0.0.2")+"/v1/migrations", &migs); err != nil {
		t.Fatal(err)
	}
	for _, m := range migs.Migrations {
		t.Logf("GET /v1/migrations on n2: %s ran %s %s -> %s %s: total %.1f ms, pause %.1f ms", m.Node, m.Group, m.From, m.To, m.State, m.TotalSeconds*1000, m.PauseSeconds*1000)
	}
	if len(migs.Nodes) != 3 || len(migs.Unanswered) != 0 || len(migs.Migrations) < 2 {
		t.Fatalf("GET /v1/migrations on n2: nodes %v, unanswered %v, %d migrations (want at least the two moves)", migs.Nodes, migs.Unanswered, len(migs.Migrations))
	}
}
