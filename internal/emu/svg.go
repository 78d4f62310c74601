package emu

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
)

// chart is a line chart written as a standalone SVG document.
type chart struct {
	Title, XLabel, YLabel string
	// LogX, LogY use base-10 logarithmic axes (all values must be > 0).
	LogX, LogY bool
	Series     []series
	// HLine draws a dashed horizontal reference line (e.g. the latency
	// threshold) labelled HLineLabel, when HLineLabel is not empty.
	HLine      float64
	HLineLabel string
}

type series struct {
	Name  string
	X, Y  []float64
	Dash  bool
	Color string // "" picks from the palette by position
}

// palette gives each series a colour, by position.
var palette = []string{"#1f77b4", "#17becf", "#2ca02c", "#000000", "#ff7f0e", "#d62728", "#9467bd", "#8c564b"}

const (
	chartW, chartH                         = 720, 440
	marginL, marginR, marginT, marginB     = 80, 170, 50, 60
	plotW, plotH                           = chartW - marginL - marginR, chartH - marginT - marginB
	fontSans                               = `font-family="Helvetica,Arial,sans-serif"`
	tickLen                                = 5
	legendX, legendY, legendDY, legendLine = chartW - marginR + 15, marginT + 10, 20, 24
)

// svg renders the chart. Axes span the data (and the reference line); the y
// axis of a linear chart starts at 0.
func (c *chart) svg() []byte {
	var xs, ys []float64
	for _, s := range c.Series {
		xs = append(xs, s.X...)
		ys = append(ys, s.Y...)
	}
	if c.HLineLabel != "" {
		ys = append(ys, c.HLine)
	}
	xAxis := newAxis(xs, c.LogX, false)
	yAxis := newAxis(ys, c.LogY, true)
	px := func(v float64) float64 { return marginL + xAxis.frac(v)*plotW }
	py := func(v float64) float64 { return marginT + (1-yAxis.frac(v))*plotH }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" %s font-size="16" font-weight="bold">%s</text>`+"\n", marginL, fontSans, html.EscapeString(c.Title))
	// Grid and ticks.
	for _, t := range yAxis.ticks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>`+"\n", marginL, y, marginL+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s font-size="12" text-anchor="end">%s</text>`+"\n", marginL-tickLen-3, y+4, fontSans, formatTick(t))
	}
	for _, t := range xAxis.ticks {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>`+"\n", x, marginT, x, marginT+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" %s font-size="12" text-anchor="middle">%s</text>`+"\n", x, marginT+plotH+tickLen+14, fontSans, formatTick(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", marginL, marginT, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" %s font-size="13" text-anchor="middle">%s</text>`+"\n", marginL+plotW/2, chartH-12, fontSans, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text x="18" y="%d" %s font-size="13" text-anchor="middle" transform="rotate(-90 18 %d)">%s</text>`+"\n", marginT+plotH/2, fontSans, marginT+plotH/2, html.EscapeString(c.YLabel))
	if c.HLineLabel != "" {
		y := py(c.HLine)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888" stroke-dasharray="6 4"/>`+"\n", marginL, y, marginL+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s font-size="11" fill="#666" text-anchor="end">%s</text>`+"\n", marginL+plotW-4, y-4, fontSans, html.EscapeString(c.HLineLabel))
	}
	// Series and legend.
	for i, s := range c.Series {
		colour := s.Color
		if colour == "" {
			colour = palette[i%len(palette)]
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="5 3"`
		}
		var pts bytes.Buffer
		for k := range s.X {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.X[k]), py(s.Y[k]))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", bytes.TrimSpace(pts.Bytes()), colour, dash)
		for k := range s.X {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(s.X[k]), py(s.Y[k]), colour)
		}
		ly := legendY + i*legendDY
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", legendX, ly, legendX+legendLine, ly, colour, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" %s font-size="12">%s</text>`+"\n", legendX+legendLine+6, ly+4, fontSans, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// axis maps values to [0, 1] and lists its ticks.
type axis struct {
	lo, hi float64
	log    bool
	ticks  []float64
}

func newAxis(vs []float64, log, fromZero bool) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if log && v <= 0 {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if log {
		a := axis{lo: math.Floor(math.Log10(lo)), hi: math.Ceil(math.Log10(hi)), log: true}
		if a.hi == a.lo {
			a.hi++
		}
		for e := a.lo; e <= a.hi; e++ {
			a.ticks = append(a.ticks, math.Pow(10, e))
		}
		return a
	}
	if fromZero {
		lo = math.Min(lo, 0)
	}
	// Few distinct values (a varied parameter): tick exactly at them.
	distinct := slices.Compact(slices.Sorted(slices.Values(vs)))
	if !fromZero && len(distinct) <= 12 {
		pad := (hi - lo) * 0.05
		if pad == 0 {
			pad = 1
		}
		return axis{lo: lo - pad, hi: hi + pad, ticks: distinct}
	}
	if hi == lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 6)
	a := axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step}
	for t := a.lo; t <= a.hi+step/2; t += step {
		a.ticks = append(a.ticks, t)
	}
	return a
}

func (a axis) frac(v float64) float64 {
	if a.log {
		if v <= 0 {
			return 0
		}
		return (math.Log10(v) - a.lo) / (a.hi - a.lo)
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func formatTick(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
