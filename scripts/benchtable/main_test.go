package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/bench"
)

func TestMediansAndRatios(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, r bench.Result) {
		b, _ := json.Marshal(&r)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, rate := range []float64{100, 300, 200} { // median 200
		put("a__p2p__"+string(rune('1'+i))+".json", bench.Result{Scenario: "p2p", DeliverRate: rate})
	}
	for i, rate := range []float64{50, 150} { // median 100
		put("b__p2p__"+string(rune('1'+i))+".json", bench.Result{Scenario: "p2p", DeliverRate: rate})
	}
	put("a__conn__1.json", bench.Result{Scenario: "connections", Connections: &bench.ConnStats{RSSPerConnBytes: 3000},
		Broker: &bench.BrokerStats{PID: 1}})
	runs, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	write(&out, runs, []string{"a", "b"})
	s := out.String()
	if !strings.Contains(s, "| p2p | delivered msg/s | higher | 200 | 100 | 2.00 |") {
		t.Errorf("median/ratio row missing:\n%s", s)
	}
	if !strings.Contains(s, "| conn | broker RSS bytes/conn | lower | 3000 | – | – |") {
		t.Errorf("connections row missing:\n%s", s)
	}
	if !strings.Contains(s, "p2p: a 3 runs") {
		t.Errorf("run counts missing:\n%s", s)
	}
}
