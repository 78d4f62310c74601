package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes res as one indented JSON document.
func WriteJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// maxPubRows bounds the per-publisher rows of the text report.
const maxPubRows = 20

// WriteText writes res as a human-readable table.
func WriteText(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }

	run := fmt.Sprintf("%s against %s, MQTT %s, QoS %d", res.Scenario, res.URL, res.Version, res.QoS)
	row("run", "%s", run)
	if c := res.Connections; c != nil {
		row("connections", "%d opened, %d failed (target %d) in %.2f s", c.Opened, c.Failed, c.Target, c.RampSeconds)
		row("connect+subscribe ms", "%s", latencyLine(c.Connect))
	} else {
		shape := fmt.Sprintf("%d B payload, %d pub, %d sub, %d topic", res.PayloadSize, res.Pubs, res.Subs, res.Topics)
		if res.TargetRate > 0 {
			shape += fmt.Sprintf(", rate %s msg/s", num(res.TargetRate))
		} else {
			shape += ", closed loop"
		}
		if res.Window > 0 {
			shape += fmt.Sprintf(", window %d", res.Window)
		}
		row("shape", "%s", shape)
		acked := ""
		if res.QoS > 0 {
			acked = fmt.Sprintf(", %d acked, %d refused/failed", res.Acked, res.PubFailed)
		}
		row("published", "%d in %.2f s (%s msg/s)%s", res.Sent, res.PublishSeconds, num(res.SendRate), acked)
		row("delivered", "%d of %d expected in %.2f s (%s msg/s)", res.Received, res.Expected, res.Seconds, num(res.DeliverRate))
		row("accounting", "lost %d, duplicated %d, reordered %d, foreign %d", res.Lost, res.Duplicated, res.Reordered, res.Foreign)
		if x := res.SxIndex; x != nil {
			row("sx-index", "%d indexed, %d missing, %d skipped, %d backwards", x.Indexed, x.Missing, x.Gaps, x.Backwards)
		}
		row("latency ms", "%s", latencyLine(res.Latency))
		if res.TargetRate > 0 {
			row("send lag ms", "mean %.3f, max %.3f", res.SendLagMean, res.SendLagMax)
		}
	}
	g := res.Generator
	row("generator cpu", "%.2f s = %.2f cores of %d (whole machine busy: %.2f cores)", g.CPUSeconds, g.Cores, g.NumCPU, res.MachineCores)
	if b := res.Broker; b != nil {
		line := fmt.Sprintf("pid %d: %.2f s = %.2f cores", b.PID, b.CPUSeconds, b.Cores)
		if b.CPUPerMsgUS > 0 {
			line += fmt.Sprintf(", %.2f µs per delivered message", b.CPUPerMsgUS)
		}
		row("broker cpu", "%s", line)
		mem := fmt.Sprintf("%s -> %s", kib(b.RSSBeforeKiB), kib(b.RSSAfterKiB))
		if c := res.Connections; c != nil && c.Opened > 0 {
			mem += fmt.Sprintf(" (%.0f bytes per connection)", c.RSSPerConnBytes)
		}
		row("broker rss", "%s", mem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if anomalies(res) {
		fmt.Fprintln(w, "per publisher (rows with anomalies):")
		pw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(pw, "pub\tsent\texpected\treceived\tlost\tduplicated\treordered\t")
		n := 0
		for _, a := range res.PerPublisher {
			if a.Lost == 0 && a.Duplicated == 0 && a.Reordered == 0 {
				continue
			}
			if n++; n > maxPubRows {
				fmt.Fprintln(pw, "...\t\t\t\t\t\t\t")
				break
			}
			fmt.Fprintf(pw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", a.Pub, a.Sent, a.Expected, a.Received, a.Lost, a.Duplicated, a.Reordered)
		}
		if err := pw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if res.ErrorCount > 0 {
		fmt.Fprintf(w, "errors: %d (first %d below)\n", res.ErrorCount, len(res.Errors))
		for _, e := range res.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	return nil
}

func anomalies(res *Result) bool {
	return res.Lost+res.Duplicated+res.Reordered > 0 || (res.SxIndex != nil && res.SxIndex.Missing+res.SxIndex.Gaps+res.SxIndex.Backwards > 0)
}

// Anomalies reports whether res saw a lost, duplicated or reordered
// message, or an error.
func Anomalies(res *Result) bool { return anomalies(res) || res.ErrorCount > 0 }

func latencyLine(l Latency) string {
	if l.Count == 0 {
		return "no samples"
	}
	return fmt.Sprintf("min %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (n=%d)",
		l.Min, l.P50, l.P90, l.P99, l.P999, l.Max, l.Count)
}

// LatencyLine renders a latency summary on one line, for the client tools.
func LatencyLine(l Latency) string { return latencyLine(l) }

func kib(k int64) string { return fmt.Sprintf("%.1f MiB", float64(k)/1024) }

// num renders a rate with thousands separators.
func num(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// FormatProgress renders a progress snapshot on one line.
func FormatProgress(p Progress) string {
	if p.Phase == "connect" || p.Phase == "hold" {
		return fmt.Sprintf("%5.0fs %-7s connections %d", p.Elapsed.Seconds(), p.Phase, p.Conns)
	}
	return fmt.Sprintf("%5.0fs %-7s sent %d  received %d", p.Elapsed.Seconds(), p.Phase, p.Sent, p.Received)
}
