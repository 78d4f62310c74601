package emu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/placement"
)

// MonitoringResult compares the size of the per-topic monitoring report
// with centroid aggregation (placement.AppendSummary) and without it
// (placement.AppendClients, every client's coordinate), as in ePulsar's
// Fig. 6.
type MonitoringResult struct {
	// ClientsPerTopic[i] clients give reports of Summary[i] and AllPairs[i]
	// bytes per topic.
	ClientsPerTopic   []int
	Summary, AllPairs []int
	// Topics are the topic counts of the data-rate table; Period is how
	// often a home reports.
	Topics []int
	Period time.Duration
	Notes  []string
}

// MonitoringClients and MonitoringTopics are the values the monitoring
// scenario varies.
var (
	MonitoringClients = []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	MonitoringTopics  = []int{100, 1000, 10000}
)

// monitoringPeriod is how often a home reports its topics (ePulsar's load
// manager period).
const monitoringPeriod = 5 * time.Second

// RunMonitoring measures report sizes for topics whose clients (half
// producers, half consumers) are spread over 16 US cities with Vivaldi
// coordinates, so the coordinates are realistic 8-dimensional ones.
func RunMonitoring(opt Options) (*MonitoringResult, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	sites, full, err := USCities()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x3017))
	m := full.Sub(rng.Perm(len(sites))[:16])
	vc := opt.Vivaldi
	vc.Seed = rng.Uint64()
	cs, err := Embed(m, vc)
	if err != nil {
		return nil, err
	}
	w := newWorld(m, cs)
	r := &MonitoringResult{Topics: MonitoringTopics, Period: monitoringPeriod}
	for _, n := range MonitoringClients {
		var c placement.Clients
		for i := 0; i < n; i++ {
			cl := w.client(rng.IntN(len(w.nodes)), mmogAccess, mmogRate)
			if i%2 == 0 {
				c.Producers = append(c.Producers, cl)
			} else {
				c.Consumers = append(c.Consumers, cl)
			}
		}
		home := w.nodes[0]
		s, err := placement.Summarize(c, &home)
		if err != nil {
			return nil, fmt.Errorf("emu: monitoring: %w", err)
		}
		const name = "game/avatar/0001"
		r.ClientsPerTopic = append(r.ClientsPerTopic, n)
		r.Summary = append(r.Summary, len(placement.AppendSummary(nil, name, s)))
		r.AllPairs = append(r.AllPairs, len(placement.AppendClients(nil, name, s.Worst, s.Rates, c)))
	}
	r.Notes = append(r.Notes,
		fmt.Sprintf("seed %d; coordinates: Vivaldi over 16 random US cities (%s)", opt.Seed, strings.Join(m.Names, ", ")),
		"topic name \"game/avatar/0001\" (16 bytes); half of the clients produce, half consume; clients on random cities",
		fmt.Sprintf("data rate = topics x bytes per topic report / %v (one report per topic per period)", monitoringPeriod))
	return r, nil
}

// rate is the monitoring traffic in kB/s for topics topics of size bytes.
func (r *MonitoringResult) rate(topics, size int) float64 {
	return float64(topics*size) / r.Period.Seconds() / 1000
}

// Markdown renders the size table and the data-rate table.
func (r *MonitoringResult) Markdown() string {
	var b strings.Builder
	b.WriteString("## Monitoring cost per topic (`monitoring`)\n\n")
	b.WriteString("| clients per topic | summary report (B) | all-pairs report (B) | all-pairs / summary |\n|---:|---:|---:|---:|\n")
	for i, n := range r.ClientsPerTopic {
		fmt.Fprintf(&b, "| %d | %d | %d | %.1f |\n", n, r.Summary[i], r.AllPairs[i], float64(r.AllPairs[i])/float64(r.Summary[i]))
	}
	fmt.Fprintf(&b, "\nMonitoring traffic to the placement manager (kB/s, one report per topic every %v):\n\n", r.Period)
	b.WriteString("| clients per topic |")
	for _, t := range r.Topics {
		fmt.Fprintf(&b, " summary, %d topics | all-pairs, %d topics |", t, t)
	}
	b.WriteString("\n|---:|" + strings.Repeat("---:|---:|", len(r.Topics)) + "\n")
	for i, n := range r.ClientsPerTopic {
		fmt.Fprintf(&b, "| %d |", n)
		for _, t := range r.Topics {
			fmt.Fprintf(&b, " %.1f | %.1f |", r.rate(t, r.Summary[i]), r.rate(t, r.AllPairs[i]))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nNotes:\n\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n")
	return b.String()
}

// Files are monitoring.md, monitoring.csv, and two charts: report size
// against clients per topic, and data rate against the number of topics.
func (r *MonitoringResult) Files() []File {
	var csv bytes.Buffer
	csv.WriteString("clients_per_topic,summary_bytes,allpairs_bytes\n")
	for i, n := range r.ClientsPerTopic {
		fmt.Fprintf(&csv, "%d,%d,%d\n", n, r.Summary[i], r.AllPairs[i])
	}
	size := chart{
		Title: "Monitoring report size per topic", XLabel: "clients per topic", YLabel: "bytes per topic per report",
		LogX: true, LogY: true,
	}
	s, a := series{Name: "summary"}, series{Name: "all-pairs"}
	for i, n := range r.ClientsPerTopic {
		s.X, s.Y = append(s.X, float64(n)), append(s.Y, float64(r.Summary[i]))
		a.X, a.Y = append(a.X, float64(n)), append(a.Y, float64(r.AllPairs[i]))
	}
	size.Series = []series{s, a}
	rate := chart{
		Title: "Monitoring traffic", XLabel: "topics", YLabel: fmt.Sprintf("kB/s (one report per topic every %v)", r.Period),
		LogX: true, LogY: true,
	}
	// The centroid report does not depend on the clients: one line, drawn
	// with the largest report measured.
	largest := slices.Max(r.Summary)
	c := series{Name: "summary, any clients"}
	for _, t := range r.Topics {
		c.X, c.Y = append(c.X, float64(t)), append(c.Y, r.rate(t, largest))
	}
	rate.Series = append(rate.Series, c)
	for i, n := range r.ClientsPerTopic {
		if n != 8 && n != 64 && n != 512 {
			continue
		}
		p := series{Name: fmt.Sprintf("all-pairs, %d clients", n), Dash: true}
		for _, t := range r.Topics {
			p.X, p.Y = append(p.X, float64(t)), append(p.Y, r.rate(t, r.AllPairs[i]))
		}
		rate.Series = append(rate.Series, p)
	}
	return []File{
		{Name: "monitoring.md", Data: []byte(r.Markdown())},
		{Name: "monitoring.csv", Data: csv.Bytes()},
		{Name: "monitoring-size.svg", Data: size.svg()},
		{Name: "monitoring-rate.svg", Data: rate.svg()},
	}
}
