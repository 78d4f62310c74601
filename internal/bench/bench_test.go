package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/bench"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient/mqttclienttest"
)

func run(t *testing.T, cfg bench.Config) *bench.Result {
	t.Helper()
	if cfg.Drain == 0 {
		cfg.Drain = 500 * time.Millisecond
	}
	if cfg.Hold == 0 {
		cfg.Hold = 50 * time.Millisecond
	}
	cfg.Seed = 1
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run %s: %v", cfg.Scenario, err)
	}
	var out bytes.Buffer
	if err := bench.WriteText(&out, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	return res
}

// clean asserts that every expected message arrived exactly once, in order.
func clean(t *testing.T, res *bench.Result, wantExpected int64) {
	t.Helper()
	if res.Expected != wantExpected || res.Received != wantExpected || res.Lost+res.Duplicated+res.Reordered+res.Foreign != 0 || res.ErrorCount != 0 {
		t.Fatalf("expected %d (want %d), received %d, lost %d, dup %d, reordered %d, foreign %d, errors %v",
			res.Expected, wantExpected, res.Received, res.Lost, res.Duplicated, res.Reordered, res.Foreign, res.Errors)
	}
	if res.Latency.Count != wantExpected || res.Latency.P99 <= 0 || res.Latency.Max < res.Latency.P99 {
		t.Fatalf("latency summary inconsistent: %+v", res.Latency)
	}
}

func TestScenariosAgainstSextant(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	url := "mqtt://" + n.MQTT()
	cases := []struct {
		cfg      bench.Config
		expected int64
	}{
		{bench.Config{Scenario: bench.P2P, QoS: 0, Count: 2000}, 2000},
		{bench.Config{Scenario: bench.P2P, QoS: 1, Count: 2000, Version: packet.V311}, 2000},
		{bench.Config{Scenario: bench.P2P, QoS: 2, Count: 1000, PayloadSize: 1024}, 1000},
		{bench.Config{Scenario: bench.Fanout, QoS: 1, Subs: 20, Count: 200}, 4000},
		{bench.Config{Scenario: bench.Fanin, QoS: 1, Pubs: 5, Count: 400}, 2000},
		{bench.Config{Scenario: bench.ManyTopics, QoS: 1, Topics: 10, Pubs: 3, Count: 500}, 1500},
		{bench.Config{Scenario: bench.Rate, QoS: 1, Rate: 4000, Count: 1000, BrokerPID: os.Getpid()}, 1000},
	}
	for _, c := range cases {
		c.cfg.URL = url
		t.Run(fmt.Sprintf("%s/qos%d/v%d", c.cfg.Scenario, c.cfg.QoS, c.cfg.Version), func(t *testing.T) {
			res := run(t, c.cfg)
			clean(t, res, c.expected)
			if res.QoS > 0 && res.Acked != res.Sent {
				t.Errorf("acked %d of %d", res.Acked, res.Sent)
			}
			if c.cfg.BrokerPID != 0 && (res.Broker == nil || res.Broker.RSSAfterKiB <= 0) {
				t.Errorf("broker stats missing: %+v", res.Broker)
			}
		})
	}
}

func TestScenariosAgainstMosquitto(t *testing.T) {
	m := mqttclienttest.StartMosquitto(t)
	url := "mqtt://" + m.Addr()
	t.Run("p2p/qos1", func(t *testing.T) {
		res := run(t, bench.Config{URL: url, Scenario: bench.P2P, QoS: 1, Count: 2000, BrokerPID: m.PID()})
		clean(t, res, 2000)
		if res.Broker == nil || res.Broker.PID != m.PID() || res.Broker.RSSBeforeKiB <= 0 {
			t.Fatalf("broker stats: %+v", res.Broker)
		}
	})
	t.Run("fanout/qos0/v311", func(t *testing.T) {
		res := run(t, bench.Config{URL: url, Scenario: bench.Fanout, Subs: 10, Count: 300, Version: packet.V311})
		clean(t, res, 3000)
	})
	t.Run("connections", func(t *testing.T) {
		res := run(t, bench.Config{URL: url, Scenario: bench.Connections, Conns: 50, BrokerPID: m.PID()})
		if c := res.Connections; c == nil || c.Opened != 50 || c.Failed != 0 || c.Connect.Count != 50 {
			t.Fatalf("connections: %+v", res.Connections)
		}
		if res.Broker == nil {
			t.Fatal("no broker stats")
		}
	})
}

func TestConnectionsAgainstSextant(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	res := run(t, bench.Config{URL: n.MQTT(), Scenario: bench.Connections, Conns: 100, QoS: 1, BrokerPID: os.Getpid()})
	if c := res.Connections; c == nil || c.Opened != 100 || c.Failed != 0 {
		t.Fatalf("connections: %+v", res.Connections)
	}
	if res.Broker == nil || res.Broker.RSSAfterKiB <= 0 {
		t.Fatalf("broker stats: %+v", res.Broker)
	}
}

// The accounting must catch a broker that loses, duplicates or reorders.
func TestAccountingCatchesMisbehavingBroker(t *testing.T) {
	cases := []struct {
		name           string
		faults         mqttclienttest.Faults
		lost, dup, ooo int64
	}{
		{"honest", mqttclienttest.Faults{}, 0, 0, 0},
		{"drops every 100th", mqttclienttest.Faults{DropEvery: 100}, 10, 0, 0},
		{"duplicates one", mqttclienttest.Faults{Duplicate: 500}, 0, 1, 0},
		{"swaps two", mqttclienttest.Faults{SwapAfter: 300}, 0, 0, 1},
	}
	for _, c := range cases {
		for _, qos := range []byte{0, 1} {
			t.Run(fmt.Sprintf("%s/qos%d", c.name, qos), func(t *testing.T) {
				b := mqttclienttest.Start(t, c.faults)
				res := run(t, bench.Config{URL: b.Addr(), Scenario: bench.P2P, QoS: qos, Count: 1000, Drain: 200 * time.Millisecond})
				if res.Sent != 1000 || res.Expected != 1000 {
					t.Fatalf("sent %d, expected %d", res.Sent, res.Expected)
				}
				if res.Lost != c.lost || res.Duplicated != c.dup || res.Reordered != c.ooo {
					t.Fatalf("lost %d dup %d reordered %d; want %d %d %d", res.Lost, res.Duplicated, res.Reordered, c.lost, c.dup, c.ooo)
				}
				if res.Received != 1000-c.lost {
					t.Fatalf("received %d distinct, want %d", res.Received, 1000-c.lost)
				}
				pa := res.PerPublisher
				if len(pa) != 1 || pa[0].Lost != c.lost || pa[0].Duplicated != c.dup || pa[0].Reordered != c.ooo {
					t.Fatalf("per publisher: %+v", pa)
				}
				var out bytes.Buffer
				bench.WriteText(&out, res)
				if (c.lost+c.dup+c.ooo > 0) != strings.Contains(out.String(), "per publisher") {
					t.Errorf("text report and anomalies disagree:\n%s", out.String())
				}
			})
		}
	}
}

func TestAccountingPerPublisherInFanin(t *testing.T) {
	// Deliveries are numbered across publishers, so with 4 publishers
	// sending 250 each the broker drops 10 in all; each is charged to the
	// publisher that sent it.
	b := mqttclienttest.Start(t, mqttclienttest.Faults{DropEvery: 100})
	res := run(t, bench.Config{URL: b.Addr(), Scenario: bench.Fanin, Pubs: 4, QoS: 1, Count: 250, Drain: 200 * time.Millisecond})
	var lost int64
	for _, a := range res.PerPublisher {
		if a.Sent != 250 || a.Expected != 250 || a.Received+a.Lost != 250 {
			t.Fatalf("publisher %+v", a)
		}
		lost += a.Lost
	}
	if lost != 10 || res.Lost != 10 {
		t.Fatalf("lost %d (total %d), want 10", lost, res.Lost)
	}
}

func TestUnreachableBrokerIsASetupError(t *testing.T) {
	b := mqttclienttest.Start(t, mqttclienttest.Faults{})
	addr := b.Addr()
	b.Close()
	for _, s := range []bench.Scenario{bench.P2P, bench.Connections} {
		_, err := bench.Run(context.Background(), bench.Config{URL: addr, Scenario: s, Count: 10})
		if err == nil || !strings.Contains(err.Error(), "cannot reach") {
			t.Errorf("%s: got %v", s, err)
		}
	}
}

func TestJSONOutputRoundTrips(t *testing.T) {
	b := mqttclienttest.Start(t, mqttclienttest.Faults{})
	res := run(t, bench.Config{URL: b.Addr(), Scenario: bench.P2P, Count: 100})
	var out bytes.Buffer
	if err := bench.WriteJSON(&out, res); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "sent", "received", "lost", "duplicated", "reordered", "latency", "generator"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	lat := back["latency"].(map[string]any)
	for _, k := range []string{"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency lacks %q", k)
		}
	}
}

func TestNormalize(t *testing.T) {
	c := bench.Config{URL: "x", Scenario: bench.ManyTopics, Topics: 7}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if c.Subs != 7 || c.Pubs != 10 || c.PayloadSize != 64 || c.Duration != 10*time.Second || c.Version != packet.V5 {
		t.Fatalf("defaults: %+v", c)
	}
	bad := []bench.Config{
		{URL: "x", Scenario: "nope"},
		{Scenario: bench.P2P},
		{URL: "x", PayloadSize: 10},
		{URL: "x", QoS: 3},
		{URL: "x", Version: 3},
		{URL: "x", Count: -1},
		{URL: "x", Inflight: 70000},
	}
	for _, b := range bad {
		if err := b.Normalize(); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
}

// A window the broker's Receive Maximum cuts below --inflight is said in a
// note, not only in the JSON's effective window.
func TestReceiveMaximumCapIsNoted(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.ReceiveMaximum = 50
	n := brokertest.Start(t, cfg)
	for _, inflight := range []int{100, 20} {
		res := run(t, bench.Config{URL: "mqtt://" + n.MQTT(), Scenario: bench.P2P, QoS: 1, Count: 500, Inflight: inflight})
		clean(t, res, 500)
		noted := false
		for _, note := range res.Notes {
			noted = noted || strings.Contains(note, "Receive Maximum capped")
		}
		switch {
		case inflight > 50 && (res.Window != 50 || !noted):
			t.Errorf("--inflight %d against receive maximum 50: window %d, notes %q", inflight, res.Window, res.Notes)
		case inflight <= 50 && (res.Window != inflight || noted):
			t.Errorf("--inflight %d against receive maximum 50: window %d, notes %q", inflight, res.Window, res.Notes)
		}
	}
}
