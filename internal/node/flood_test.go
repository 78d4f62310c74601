package node_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// liveHeap is the heap still reachable after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func dialFromAddr(ip, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

func encode(p packet.Packet) []byte {
	b, err := p.Append(nil, packet.V5)
	if err != nil {
		panic(err)
	}
	return b
}

// TestFloodLeavesOtherClientsWorking runs four attacks at once against one
// node, each from its own loopback address:
//
//   - 127.0.0.2 opens hundreds of connections that never send CONNECT
//     (max-connections-per-ip closes most at accept; connect-timeout ends
//     the rest);
//   - 127.0.0.3 sends packets declaring 200 MB (before and after CONNECT),
//     far over max-packet-size;
//   - 127.0.0.4 publishes 16 KiB messages as fast as it can (publish-rate
//     pauses it);
//   - 127.0.0.5 subscribes to that storm and stops reading (its queue stays
//     at max-queued-messages, then write-timeout disconnects it).
//
// Meanwhile a publisher and a subscriber on 127.0.0.1 exchange QoS 1
// messages at a steady pace: every one arrives, in order. The broker's
// live heap and goroutine count stay under bounds computed from the
// limits, and every attack met its stated reaction.
func TestFloodLeavesOtherClientsWorking(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.MaxConnsPerIP = 40
	cfg.LimitLoopback = true // the attackers and the good clients are all on 127.0.0.1
	cfg.ConnectTimeout = time.Second
	cfg.MaxPacketSize = 64 << 10
	cfg.PublishRate = 100 // low enough that even a loaded -race run reaches it (250 was not, at a load average of 12), above the good publisher's 50 a second
	cfg.MaxQueuedMessages = 200
	cfg.WriteTimeout = time.Second
	n := brokertest.Start(t, cfg)

	goodSub := connectOK(t, brokertest.NewRaw(t, dialFrom(t, "127.0.0.1", n.MQTT()), packet.V5), login(packet.V5, "good-sub", "", ""))
	goodSub.Subscribe(1, sub("good/#", 1))
	goodPub := connectOK(t, brokertest.NewRaw(t, dialFrom(t, "127.0.0.1", n.MQTT()), packet.V5), login(packet.V5, "good-pub", "", ""))
	heap0, g0 := liveHeap(), runtime.NumGoroutine()

	const (
		idleDials = 400
		oversized = 40
		payload   = 16 << 10
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn // attack connections, closed at the end
	keep := func(c net.Conn) {
		mu.Lock()
		held = append(held, c)
		mu.Unlock()
	}
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	errs := make(chan error, 16)

	// 1. Connections that never send CONNECT.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < idleDials; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if c, err := dialFromAddr("127.0.0.2", n.MQTT()); err == nil {
				keep(c)
			}
		}
	}()

	// 2. Oversized packets: each connection must be closed by the broker
	// without it reading (or allocating) the declared size.
	var closedOversized sync.WaitGroup
	closed := make(chan bool, oversized)
	for i := 0; i < oversized; i++ {
		closedOversized.Add(1)
		go func() {
			defer closedOversized.Done()
			c, err := dialFromAddr("127.0.0.3", n.MQTT())
			if err != nil {
				errs <- err
				return
			}
			keep(c)
			huge := []byte{0x30, 0x80, 0x80, 0x80, 0x64} // PUBLISH, remaining length 200 MiB
			if i%4 == 0 {
				huge[0] = 0x10 // CONNECT of 200 MiB
			} else {
				_, _ = c.Write(encode(login(packet.V5, fmt.Sprint("big-", i), "", "")))
			}
			_, _ = c.Write(append(huge, bytes.Repeat([]byte{'x'}, 1024)...))
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			closed <- !(errors.As(err, &ne) && ne.Timeout())
		}()
	}

	// 4 (first, so the storm has someone to reach). A subscriber that stops reading.
	stalled, err := dialFromAddr("127.0.0.5", n.MQTT())
	if err != nil {
		t.Fatal(err)
	}
	keep(stalled)
	_ = stalled.(*net.TCPConn).SetReadBuffer(4096)
	_, _ = stalled.Write(encode(login(packet.V5, "stalled", "", "")))
	_, _ = stalled.Write(encode(&packet.Subscribe{PacketID: 1, Subs: []packet.Subscription{sub("storm/#", 0)}}))
	readPackets(t, stalled, 2) // CONNACK, SUBACK; then it reads nothing more

	// 3. A publish storm.
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := dialFromAddr("127.0.0.4", n.MQTT())
		if err != nil {
			errs <- err
			return
		}
		keep(c)
		_, _ = c.Write(encode(login(packet.V5, "storm", "", "")))
		msg := encode(pub("storm/x", 0, 0, string(bytes.Repeat([]byte{'s'}, payload))))
		batch := bytes.Repeat(msg, 4)
		go func() { _, _ = io.Copy(io.Discard, c) }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			_, _ = c.Write(batch) // a timeout is the broker pausing us
		}
	}()

	// The good clients' traffic, sampled for memory and goroutines: at
	// least minMsgs messages, and on until the storm has been paused (on a
	// loaded machine the storm may take longer to outrun its rate limit's
	// burst), up to maxMsgs.
	const minMsgs, maxMsgs = 120, 3000
	var peakHeap uint64
	peakG := 0
	var worst time.Duration
	tick := time.NewTicker(20 * time.Millisecond)
	msgs := 0
	for i := 1; i <= maxMsgs && (i <= minMsgs || limitsHit(n, metrics.LimitPublishRate) == 0); i++ {
		msgs = i
		<-tick.C
		start := time.Now()
		body := fmt.Sprint("m", i)
		goodPub.Send(pub("good/x", 1, uint16(i), body))
		goodPub.ExpectAck(packet.PUBACK, uint16(i))
		m := goodSub.ExpectPublish("good/x", body)
		goodSub.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
		worst = max(worst, time.Since(start))
		if i%10 == 0 {
			peakHeap = max(peakHeap, liveHeap())
			peakG = max(peakG, runtime.NumGoroutine())
		}
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	closedOversized.Wait()
	close(closed)
	close(errs)
	for err := range errs {
		t.Fatalf("attacker: %v", err)
	}
	for c := range closed {
		if !c {
			t.Fatal("an oversized packet's connection was left open")
		}
	}

	// Bounds from the limits: the stalled subscriber's queue, and per
	// admitted attack connection a generous 64 KiB (read buffer, session,
	// socket state, the test's own client side); plus 8 MiB of slack for
	// pools and collection timing. An unbounded queue alone would have
	// grown past it: the storm got 1.6 MiB a second through the rate limit.
	attackConns := cfg.MaxConnsPerIP*2 + 2
	bound := heap0 + uint64(cfg.MaxQueuedMessages)*(payload+1024) + uint64(attackConns)*(64<<10) + 8<<20
	t.Logf("good clients: %d messages, worst round trip %v; live heap %d KiB before, peak %d KiB (bound %d KiB); goroutines %d before, peak %d",
		msgs, worst, heap0>>10, peakHeap>>10, bound>>10, g0, peakG)
	if peakHeap > bound {
		t.Errorf("live heap peaked at %d KiB, over the bound of %d KiB", peakHeap>>10, bound>>10)
	}
	// Per admitted attack connection: its reader, a writer at times, and
	// the test's attacker goroutines.
	if gBound := g0 + 2*attackConns + oversized + 8; peakG > gBound {
		t.Errorf("goroutines peaked at %d, over the bound of %d", peakG, gBound)
	}
	if worst > 3*time.Second {
		t.Errorf("a good client's message took %v", worst)
	}
	for _, c := range []struct {
		limit string
		what  string
	}{
		{metrics.LimitConnsPerIP, "connections closed at accept"},
		{metrics.LimitPublishRate, "storm paused"},
	} {
		if limitsHit(n, c.limit) == 0 {
			t.Errorf("no %s", c.what)
		}
	}
	if got := brokertest.Value(n.Metrics().ProtocolErrors.WithLabelValues(packet.PacketTooLarge.String())); got != oversized {
		t.Errorf("packets too large counted %v, want %d", got, oversized)
	}
	if q := brokertest.Value(n.Metrics().QueuedMessages); q > float64(cfg.MaxQueuedMessages)+1 {
		t.Errorf("%v messages queued, over the bound", q)
	}
	brokertest.Eventually(t, 10*time.Second, func() bool {
		return !stillConnected(n, "stalled")
	}, "the subscriber that stopped reading is disconnected")
}

func stillConnected(n *brokertest.Node, id string) bool {
	for _, c := range n.Broker().Clients() {
		if c.ID == id {
			return true
		}
	}
	return false
}

// readPackets reads k whole packets from c (fixed header, remaining length,
// body) and discards them.
func readPackets(t *testing.T, c net.Conn, k int) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, 1)
	for ; k > 0; k-- {
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		rl, mul := 0, 1
		for {
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatal(err)
			}
			rl += int(b[0]&0x7f) * mul
			mul *= 128
			if b[0]&0x80 == 0 {
				break
			}
		}
		if _, err := io.CopyN(io.Discard, c, int64(rl)); err != nil {
			t.Fatal(err)
		}
	}
}
