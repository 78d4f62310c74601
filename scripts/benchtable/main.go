// Command benchtable turns the JSON results of scripts/bench-peers.sh into
// a Markdown table of medians per broker and scenario, with the ratios
// Sextant/peer. Input files are named BROKER__SCENARIO__REP.json (the output
// of `sextant bench --json`); the first broker named on the command line is
// the one the ratios are of.
//
// Usage: go run ./scripts/benchtable DIR sextant mosquitto nats
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sextantmq/sextant/internal/bench"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: benchtable DIR BROKER PEER...")
		os.Exit(2)
	}
	runs, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtable: %v\n", err)
		os.Exit(1)
	}
	write(os.Stdout, runs, os.Args[2:])
}

// key names one broker's runs of one scenario.
type key struct{ broker, scenario string }

func load(dir string) (map[key][]*bench.Result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*__*__*.json"))
	if err != nil {
		return nil, err
	}
	runs := map[key][]*bench.Result{}
	for _, f := range files {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(f), ".json"), "__")
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r bench.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		k := key{parts[0], parts[1]}
		runs[k] = append(runs[k], &r)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no results in %s", dir)
	}
	return runs, nil
}

// metric is one row: how to read it from a result, and which way is better.
type metric struct {
	name   string
	higher bool // higher is better
	get    func(*bench.Result) (float64, bool)
	format string
}

func brokerOK(r *bench.Result) bool { return r.Broker != nil }

var messageMetrics = []metric{
	{"delivered msg/s", true, func(r *bench.Result) (float64, bool) { return r.DeliverRate, true }, "%.0f"},
	{"latency p50 ms", false, func(r *bench.Result) (float64, bool) { return r.Latency.P50, r.Latency.Count > 0 }, "%.3f"},
	{"latency p99 ms", false, func(r *bench.Result) (float64, bool) { return r.Latency.P99, r.Latency.Count > 0 }, "%.3f"},
	{"latency p99.9 ms", false, func(r *bench.Result) (float64, bool) { return r.Latency.P999, r.Latency.Count > 0 }, "%.3f"},
	{"latency max ms", false, func(r *bench.Result) (float64, bool) { return r.Latency.Max, r.Latency.Count > 0 }, "%.3f"},
	{"broker CPU µs/msg", false, func(r *bench.Result) (float64, bool) {
		if !brokerOK(r) || r.Broker.CPUPerMsgUS == 0 {
			return 0, false
		}
		return r.Broker.CPUPerMsgUS, true
	}, "%.2f"},
	{"broker cores", false, func(r *bench.Result) (float64, bool) {
		if !brokerOK(r) {
			return 0, false
		}
		return r.Broker.Cores, true
	}, "%.2f"},
	{"generator cores", false, func(r *bench.Result) (float64, bool) { return r.Generator.Cores, true }, "%.2f"},
	{"whole machine busy cores", false, func(r *bench.Result) (float64, bool) { return r.MachineCores, true }, "%.2f"},
	{"lost", false, func(r *bench.Result) (float64, bool) { return float64(r.Lost), true }, "%.0f"},
	{"duplicated+reordered", false, func(r *bench.Result) (float64, bool) {
		return float64(r.Duplicated + r.Reordered), true
	}, "%.0f"},
}

var connMetrics = []metric{
	{"broker RSS bytes/conn", false, func(r *bench.Result) (float64, bool) {
		if r.Connections == nil || !brokerOK(r) {
			return 0, false
		}
		return r.Connections.RSSPerConnBytes, true
	}, "%.0f"},
	{"connect+sub p99 ms", false, func(r *bench.Result) (float64, bool) {
		if r.Connections == nil || r.Connections.Connect.Count == 0 {
			return 0, false
		}
		return r.Connections.Connect.P99, true
	}, "%.3f"},
	{"failed connections", false, func(r *bench.Result) (float64, bool) {
		if r.Connections == nil {
			return 0, false
		}
		return float64(r.Connections.Failed), true
	}, "%.0f"},
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// cell returns the median of m over runs and how many runs it covers.
func cell(runs []*bench.Result, m metric) (float64, int) {
	var v []float64
	for _, r := range runs {
		if x, ok := m.get(r); ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	return median(v), len(v)
}

func write(w io.Writer, runs map[key][]*bench.Result, brokers []string) {
	var scenarios []string
	seen := map[string]bool{}
	for k := range runs {
		if !seen[k.scenario] {
			seen[k.scenario] = true
			scenarios = append(scenarios, k.scenario)
		}
	}
	sort.Strings(scenarios)
	head := "| scenario | metric | better |"
	sep := "|---|---|---|"
	for _, b := range brokers {
		head += " " + b + " |"
		sep += "---:|"
	}
	for _, p := range brokers[1:] {
		head += " " + brokers[0] + "/" + p + " |"
		sep += "---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	for _, s := range scenarios {
		ms := messageMetrics
		if first := firstRun(runs, s); first != nil && first.Connections != nil {
			ms = connMetrics
		}
		for _, m := range ms {
			better := "lower"
			if m.higher {
				better = "higher"
			}
			row := fmt.Sprintf("| %s | %s | %s |", s, m.name, better)
			vals := make([]float64, len(brokers))
			ok := make([]bool, len(brokers))
			for i, b := range brokers {
				v, n := cell(runs[key{b, s}], m)
				if n == 0 {
					row += " – |"
					continue
				}
				vals[i], ok[i] = v, true
				row += " " + fmt.Sprintf(m.format, v) + " |"
			}
			for i := 1; i < len(brokers); i++ {
				if !ok[0] || !ok[i] || vals[i] == 0 {
					row += " – |"
					continue
				}
				row += fmt.Sprintf(" %.2f |", vals[0]/vals[i])
			}
			fmt.Fprintln(w, row)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Runs per cell (medians are over these), and runs whose report carried a CPU-saturation note or errors:")
	fmt.Fprintln(w)
	for _, s := range scenarios {
		var parts []string
		for _, b := range brokers {
			rs := runs[key{b, s}]
			sat, errs := 0, 0
			for _, r := range rs {
				for _, n := range r.Notes {
					if strings.Contains(n, "saturated") {
						sat++
						break
					}
				}
				if r.ErrorCount > 0 {
					errs++
				}
			}
			parts = append(parts, fmt.Sprintf("%s %d runs (%d saturated, %d with errors)", b, len(rs), sat, errs))
		}
		fmt.Fprintf(w, "- %s: %s\n", s, strings.Join(parts, "; "))
	}
}

func firstRun(runs map[key][]*bench.Result, scenario string) *bench.Result {
	for k, rs := range runs {
		if k.scenario == scenario && len(rs) > 0 {
			return rs[0]
		}
	}
	return nil
}
