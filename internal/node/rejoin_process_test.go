package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// rejoinWithin is how soon a restarted node must list every member, be
// ready and pass messages both ways (issue 12's bound).
const rejoinWithin = 15 * time.Second

// TestSeedNodeRestartRejoins restarts the node that bootstrapped a
// three-node cluster (started, as scripts/three-nodes.sh starts it, without
// a join list) with its original flags, after SIGTERM and after SIGKILL.
// Each time it must find the other two again by itself (from the members
// its data directory remembers), list them, answer /readyz ready and pass
// messages to and from them within rejoinWithin. After the SIGKILL the
// other two are frozen (SIGSTOP) while it restarts: cut off, it must say
// it is not ready, until they are let go. Last, with that node gone for
// good, a node whose join list names only it is restarted with that list:
// it must find the third node, which it remembers.
func TestSeedNodeRestartRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts sextant processes")
	}
	bin := brokertest.BuildSextant(t)
	mqttPort, clusterPort, adminPort := freePortOnAll(t, false), freePortOnAll(t, true), freePortOnAll(t, false)
	ips := processIPs
	procs := startThreeProcs(t, bin, mqttPort, clusterPort, adminPort, nil,
		func(int) []string { return []string{ips[0] + ":" + clusterPort} }) // as scripts/three-nodes.sh does
	n1, n2, n3 := procs[0], procs[1], procs[2]
	admin := func(ip string) string { return "http://" + ip + ":" + adminPort }
	admins := []string{admin(ips[0]), admin(ips[1]), admin(ips[2])}
	mqtt := func(p *serveProc) string { return p.ip + ":" + mqttPort }
	brokertest.Eventually(t, 60*time.Second, func() bool {
		return aliveEverywhere(admins, 3) && readyz(admins[0]) == 200 && readyz(admins[1]) == 200 && readyz(admins[2]) == 200
	}, "three ready nodes that see each other")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := deliverAcross(ctx, mqtt(n1), mqtt(n3), "before"); err != nil {
		t.Fatal(err)
	}

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if sig == syscall.SIGTERM {
			if err := n1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			n1.exited(time.Minute)
		} else {
			n1.kill()
			for _, p := range []*serveProc{n2, n3} {
				if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
			}
		}
		restarted := time.Now()
		n1.start() // the same flags: no join list
		if sig == syscall.SIGKILL {
			// Cut off: the other two do not answer.
			brokertest.Eventually(t, 30*time.Second, func() bool { return readyz(admins[0]) != 0 }, "n1's admin API answers")
			for range 3 {
				code, body := readyzBody(admins[0])
				if code != http.StatusServiceUnavailable || !strings.Contains(body, "cut off") {
					t.Fatalf("n1 cut off from n2 and n3: /readyz %d %s; want 503 saying it is cut off", code, body)
				}
				waitCtx(ctx, 500*time.Millisecond)
			}
			for _, p := range []*serveProc{n2, n3} {
				if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}
			restarted = time.Now()
		}
		brokertest.Eventually(t, rejoinWithin, func() bool {
			return aliveEverywhere(admins, 3) && readyz(admins[0]) == 200
		}, fmt.Sprintf("after %v, n1 and the others list three alive members and n1 is ready", sig))
		listed := time.Since(restarted)
		dctx, dcancel := context.WithDeadline(ctx, restarted.Add(rejoinWithin))
		if err := deliverAcross(dctx, mqtt(n1), mqtt(n3), "to-n1"); err != nil {
			t.Fatalf("after %v: n3 -> n1: %v", sig, err)
		}
		if err := deliverAcross(dctx, mqtt(n2), mqtt(n1), "from-n1"); err != nil {
			t.Fatalf("after %v: n1 -> n2: %v", sig, err)
		}
		dcancel()
		t.Logf("after %v: n1 listed every member and was ready %v after it could rejoin, and passed messages both ways %v after", sig,
			listed.Round(10*time.Millisecond), time.Since(restarted).Round(10*time.Millisecond))
	}

	// Whatever its flags: n2's join list names only n1. With n1 gone, n2
	// restarted with that list finds n3, which it remembers.
	n1.kill()
	if err := n2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n2.exited(time.Minute)
	restarted := time.Now()
	n2.start()
	brokertest.Eventually(t, rejoinWithin, func() bool {
		return aliveEverywhere([]string{admins[1], admins[2]}, 2) && readyz(admins[1]) == 200
	}, "n2, restarted with a join list naming only the dead n1, lists n3 and is ready")
	dctx, dcancel := context.WithDeadline(ctx, restarted.Add(rejoinWithin))
	defer dcancel()
	if err := deliverAcross(dctx, mqtt(n2), mqtt(n3), "to-n2"); err != nil {
		t.Fatalf("n3 -> n2 with n1 gone: %v", err)
	}
	if err := deliverAcross(dctx, mqtt(n3), mqtt(n2), "from-n2"); err != nil {
		t.Fatalf("n2 -> n3 with n1 gone: %v", err)
	}
	t.Logf("n2, its join list dead, rejoined and passed messages both ways %v after its restart", time.Since(restarted).Round(10*time.Millisecond))
}

// readyz returns the status of GET /readyz at the admin API base (0 when
// it does not answer).
func readyz(base string) int {
	code, _ := readyzBody(base)
	return code
}

func readyzBody(base string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get(base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// deliverAcross subscribes on the node at subAddr and publishes on the
// one at pubAddr, a QoS 1 probe every 100 ms (the subscription's interest
// reaches the publisher's node a moment after SUBACK), until one arrives or
// ctx ends.
func deliverAcross(ctx context.Context, subAddr, pubAddr, topic string) error {
	got := make(chan struct{}, 1)
	subOpts := mqttclient.Options{ClientID: "rejoin-sub-" + topic, OnPublish: func(*packet.Publish) {
		select {
		case got <- struct{}{}:
		default:
		}
	}}
	sub, err := mqttclient.Dial(ctx, "mqtt://"+subAddr, subOpts)
	if err != nil {
		return fmt.Errorf("subscriber on %s: %w", subAddr, err)
	}
	defer sub.Close()
	if _, err := sub.Subscribe(ctx, &packet.Subscribe{Subs: []packet.Subscription{{Filter: "rejoin/" + topic, QoS: 1}}}); err != nil {
		return fmt.Errorf("subscribe on %s: %w", subAddr, err)
	}
	pub, err := mqttclient.Dial(ctx, "mqtt://"+pubAddr, mqttclient.Options{ClientID: "rejoin-pub-" + topic})
	if err != nil {
		return fmt.Errorf("publisher on %s: %w", pubAddr, err)
	}
	defer pub.Close()
	for {
		if err := pub.Publish(ctx, &packet.Publish{Topic: "rejoin/" + topic, QoS: 1, Payload: []byte("probe")}); err != nil {
			return fmt.Errorf("publish on %s: %w", pubAddr, err)
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-got:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("nothing from %s reached %s: %w", pubAddr, subAddr, ctx.Err())
		case <-t.C:
		}
	}
}

// TestGossipFormedInPartsHeals: n2 and n3, whose join lists name n1 and
// each other, start before n1 and find each other only; n1 then
// bootstraps the cluster alone, and n2 and n3 join its metadata group
// through it. Gossip is in two parts that never hear of each other, unless
// the nodes contact the members they know of and gossip does not list: then
// all three list each other within a few healing rounds.
func TestGossipFormedInPartsHeals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sextant processes")
	}
	bin := brokertest.BuildSextant(t)
	mqttPort, clusterPort, adminPort := freePortOnAll(t, false), freePortOnAll(t, true), freePortOnAll(t, false)
	ips := processIPs
	procs := threeProcs(t, bin, mqttPort, clusterPort, adminPort, nil,
		func(i int) []string { return []string{ips[0] + ":" + clusterPort, ips[3-i] + ":" + clusterPort} })
	admin := func(p *serveProc) string { return "http://" + p.ip + ":" + adminPort }
	n1, n2, n3 := procs[0], procs[1], procs[2]
	n2.start()
	n3.start()
	brokertest.Eventually(t, time.Minute, func() bool { return aliveEverywhere([]string{admin(n2), admin(n3)}, 2) }, "n2 and n3 found each other")
	n1.start()
	brokertest.Eventually(t, 3*healInterval, func() bool {
		return aliveEverywhere([]string{admin(n1), admin(n2), admin(n3)}, 3)
	}, "the two parts of gossip joined")
}

// healInterval is node's period of checking gossip for missing nodes.
const healInterval = 10 * time.Second
