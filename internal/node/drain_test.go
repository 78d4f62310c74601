package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestDrainHandsSessionsOver drains one node of two while a subscriber with
// a persistent session is connected to it and a publisher keeps sending
// QoS 1 messages through the other: the subscriber is told to use another
// server, reconnects to the other node and takes its session along (the
// drain waits for that), and receives every acknowledged message. The
// drained node stops being ready and asks to be stopped; a second drain is
// refused.
func TestDrainHandsSessionsOver(t *testing.T) {
	n1 := brokertest.Start(t, clusterConfig(t, "d1"))
	n2 := brokertest.Start(t, clusterConfig(t, "d2", n1.Cfg.ClusterAddr))
	brokertest.Eventually(t, 30*time.Second, func() bool { return len(n1.Nodes()) == 2 && len(n2.Nodes()) == 2 }, "two members")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	in := newInbox()
	sub := &roamer{t: t, id: "drain-sub", addrs: []string{n2.MQTT(), n1.MQTT()}, filter: "drain/#", onMsg: in.add}
	sub.start(ctx, 0)
	defer sub.close()
	pub := &roamer{t: t, id: "drain-pub", addrs: []string{n1.MQTT()}}
	pub.start(ctx, 0)
	defer pub.close()

	// Interest reaches n1 a round trip after SUBACK: probe until it does.
	brokertest.Eventually(t, 30*time.Second, func() bool {
		if err := pub.publish(ctx, "drain/probe", "probe"); err != nil {
			t.Fatal(err)
		}
		return len(in.missing([]string{"probe"})) == 0
	}, "a message from n1 reaches the subscriber on n2")

	subCtx, stopSub := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() { defer close(followed); sub.follow(subCtx) }()

	var sent acked
	pubDone := make(chan error, 1)
	stopPub := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopPub:
				pubDone <- nil
				return
			default:
			}
			p := fmt.Sprintf("m%d", i)
			if err := pub.publish(ctx, "drain/x", p); err != nil {
				pubDone <- err
				return
			}
			sent.add(p)
		}
	}()
	brokertest.Eventually(t, 10*time.Second, func() bool { l, _ := sent.list(); return len(l) > 50 }, "traffic flowing")

	rep, err := n2.Drain(ctx, adminapi.DrainRequest{Timeout: "20s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drain report: %+v", rep)
	if rep.Persistent != 1 || rep.Moved != 1 || rep.OtherNodes != 1 || rep.Reason != packet.UseAnotherServer.String() {
		t.Fatalf("drain report %+v: want the one persistent session moved, clients told to use another server", rep)
	}
	if err := n2.Ready(); err == nil {
		t.Fatal("a drained node is still ready")
	}
	select {
	case <-n2.Stopping():
	default:
		t.Fatal("the drain did not ask for the node to stop")
	}
	if _, err := n2.Drain(ctx, adminapi.DrainRequest{}); !errors.Is(err, adminapi.ErrDraining) {
		t.Fatalf("second drain: %v", err)
	}
	n2.Stop()

	// More traffic after the drain, then stop and check.
	l0, _ := sent.list()
	brokertest.Eventually(t, 10*time.Second, func() bool { l, _ := sent.list(); return len(l) > len(l0)+50 }, "traffic after the drain")
	close(stopPub)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	want, _ := sent.list()
	awaitDelivered(t, in, want, 30*time.Second)
	stopSub()
	<-followed
	hops, lost := sub.summary()
	gap, _, dups := in.gap()
	t.Logf("%d messages acknowledged and delivered; subscriber hops %v; longest pause %v; %d duplicates", len(want), hops, gap, dups)
	if lost > 0 || len(hops) != 1 {
		t.Fatalf("subscriber hops %v, sessions lost %d: want one move with its session", hops, lost)
	}
}

// TestDrainAloneShutsDownClients: a node running alone has nowhere to send
// its clients: they get Server Shutting Down and the drain does not wait.
func TestDrainAloneShutsDownClients(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	c, ack := n.RawConnect(&packet.Connect{ProtocolName: "MQTT", Version: packet.V5, ClientID: "solo", KeepAlive: 60})
	if ack.ReasonCode != packet.Success {
		t.Fatal(packet.Describe(ack))
	}
	rep, err := n.Drain(context.Background(), adminapi.DrainRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c.ExpectDisconnect(packet.ServerShuttingDown)
	if rep.Disconnected != 1 || rep.OtherNodes != 0 || rep.LeadershipMoved {
		t.Fatalf("%+v", rep)
	}
	if _, err := n.Drain(context.Background(), adminapi.DrainRequest{Leave: true}); !errors.Is(err, adminapi.ErrDraining) {
		t.Fatalf("second drain: %v", err)
	}
	m := brokertest.Start(t, brokertest.Config(t))
	if _, err := m.Drain(context.Background(), adminapi.DrainRequest{Leave: true}); !errors.Is(err, adminapi.ErrCannotLeave) {
		t.Fatalf("a node running alone left its cluster: %v", err)
	}
	if err := m.Ready(); err != nil {
		t.Fatalf("a refused drain left the node unready: %v", err)
	}
}

// awaitDelivered waits until in has every payload of want, and fails the
// test naming the missing ones.
func awaitDelivered(t *testing.T, in *inbox, want []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		missing := in.missing(want)
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged messages never arrived: %s", len(missing), len(want), shortList(missing))
		}
		waitCtx(context.Background(), 20*time.Millisecond)
	}
}
