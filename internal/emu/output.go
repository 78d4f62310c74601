package emu

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// File is one output file of a scenario: a name relative to the output
// folder and its contents.
type File struct {
	Name string
	Data []byte
}

// policyColours keep a policy's colour the same on every chart.
var policyColours = map[string]string{
	"centroid": "#1f77b4", "centroid-plain": "#17becf", "center": "#2ca02c", "allpairs": "#9467bd",
	"oracle": "#000000", "publisher": "#ff7f0e", "hash": "#d62728",
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Markdown renders the result as a Markdown section: one table per point of
// the varied parameter, then the notes.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s (`%s`)\n\n", r.Title, r.Scenario)
	fmt.Fprintf(&b, "Latencies are one-way publisher -> home -> subscriber, in ms, scored against the true latencies; Lth = %v. "+
		"worst: mean over permutations of the worst pair of the permutation (max: the largest); topic worst: mean over topics of each topic's worst pair; "+
		"violations: share of producer-consumer pairs over Lth.\n\n", r.Threshold)
	for _, p := range r.Points {
		fmt.Fprintf(&b, "### %s\n\n", p.Label)
		b.WriteString("| policy | worst | max | topic worst | mean pair | violations |\n|---|---:|---:|---:|---:|---:|\n")
		for i, s := range p.Stats {
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.3f%% |\n", r.Policies[i],
				msf(s.MeanWorst), msf(s.MaxWorst), msf(s.MeanTopicWorst), msf(s.MeanPair), 100*s.ViolationRatio())
		}
		b.WriteString("\n")
	}
	b.WriteString("Notes:\n\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n")
	return b.String()
}

// CSV renders one row per point and policy.
func (r *Result) CSV() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "scenario,%s,policy,worst_ms,max_worst_ms,topic_worst_ms,mean_pair_ms,violations,pairs,violation_ratio,vivaldi_median_rel_error\n",
		strings.ReplaceAll(r.XLabel, " ", "_"))
	for _, p := range r.Points {
		for i, s := range p.Stats {
			fmt.Fprintf(&b, "%s,%d,%s,%.3f,%.3f,%.3f,%.3f,%d,%d,%.6f,%.4f\n", r.Scenario, p.X, r.Policies[i],
				msf(s.MeanWorst), msf(s.MaxWorst), msf(s.MeanTopicWorst), msf(s.MeanPair), s.Violations, s.Pairs, s.ViolationRatio(), p.Vivaldi.MedianRel)
		}
	}
	return b.Bytes()
}

// Files are the scenario's outputs: <scenario>.md, <scenario>.csv and two
// SVG line charts, worst-case latency and violation ratio against the varied
// parameter, one line per policy.
func (r *Result) Files() []File {
	worst := chart{
		Title: r.Title + ": worst-case latency", XLabel: r.XLabel,
		YLabel: "worst-case latency (ms)",
		HLine:  msf(r.Threshold), HLineLabel: fmt.Sprintf("Lth = %v", r.Threshold),
	}
	viol := chart{
		Title: r.Title + ": violations", XLabel: r.XLabel,
		YLabel: "producer-consumer pairs over Lth (%)",
	}
	for i, name := range r.Policies {
		w := series{Name: name, Dash: strings.HasSuffix(name, "-plain"), Color: policyColours[name]}
		v := w
		for _, p := range r.Points {
			w.X, w.Y = append(w.X, float64(p.X)), append(w.Y, msf(p.Stats[i].MeanWorst))
			v.X, v.Y = append(v.X, float64(p.X)), append(v.Y, 100*p.Stats[i].ViolationRatio())
		}
		worst.Series = append(worst.Series, w)
		viol.Series = append(viol.Series, v)
	}
	return []File{
		{Name: r.Scenario + ".md", Data: []byte(r.Markdown())},
		{Name: r.Scenario + ".csv", Data: r.CSV()},
		{Name: r.Scenario + "-worst.svg", Data: worst.svg()},
		{Name: r.Scenario + "-violations.svg", Data: viol.svg()},
	}
}

// Summary renders a compact Markdown table: one row per point, one column
// per policy with its worst-case latency and violation ratio.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (`%s`): worst-case latency (ms, mean over permutations) / violations\n\n| %s |", r.Title, r.Scenario, r.XLabel)
	for _, p := range r.Policies {
		fmt.Fprintf(&b, " %s |", p)
	}
	b.WriteString("\n|---:|" + strings.Repeat("---:|", len(r.Policies)) + "\n")
	for _, p := range r.Points {
		fmt.Fprintf(&b, "| %d |", p.X)
		for _, s := range p.Stats {
			fmt.Fprintf(&b, " %.1f / %.2f%% |", msf(s.MeanWorst), 100*s.ViolationRatio())
		}
		b.WriteString("\n")
	}
	return b.String()
}
