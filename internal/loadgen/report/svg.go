package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
)

// The report's charts are plain SVG written here, so report.html needs no
// script, no font and no network to show them.

// svgBuilder writes one inline <svg> element.
type svgBuilder struct {
	b strings.Builder
}

func newSVG(kind string, width, height float64, label string) *svgBuilder {
	s := &svgBuilder{}
	fmt.Fprintf(&s.b, `<svg class="chart" data-chart="%s" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`,
		kind, width, height, width, height, html.EscapeString(label))
	return s
}

func (s *svgBuilder) rect(x, y, w, h float64, class, tooltip string) {
	fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="%s">`, x, y, math.Max(w, 0), math.Max(h, 0), class)
	if tooltip != "" {
		fmt.Fprintf(&s.b, `<title>%s</title>`, html.EscapeString(tooltip))
	}
	s.b.WriteString(`</rect>`)
}

func (s *svgBuilder) text(x, y float64, anchor, class, text string) {
	fmt.Fprintf(&s.b, `<text x="%.1f" y="%.1f" text-anchor="%s" class="%s">%s</text>`, x, y, anchor, class, html.EscapeString(text))
}

func (s *svgBuilder) line(x1, y1, x2, y2 float64, class string) {
	fmt.Fprintf(&s.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="%s"/>`, x1, y1, x2, y2, class)
}

func (s *svgBuilder) path(d, class string) {
	fmt.Fprintf(&s.b, `<path d="%s" class="%s"/>`, d, class)
}

func (s *svgBuilder) html() template.HTML {
	s.b.WriteString(`</svg>`)
	return template.HTML(s.b.String()) //nolint:gosec // built from escaped parts above
}

// barRow is one bar of a horizontal bar chart.
type barRow struct {
	label   string
	value   float64
	text    string // shown at the end of the bar
	class   string
	tooltip string
	missing string // shown instead of a bar when the row has no figure
}

const (
	chartWidth  = 720.0
	labelWidth  = 190.0
	valueWidth  = 90.0
	rowHeight   = 24.0
	chartMargin = 10.0
)

// barChart draws horizontal bars on a linear scale starting at zero.
func barChart(kind, label string, rows []barRow) template.HTML {
	height := chartMargin*2 + rowHeight*float64(len(rows))
	s := newSVG(kind, chartWidth, height, label)
	maxV := 0.0
	for _, r := range rows {
		maxV = math.Max(maxV, r.value)
	}
	plot := chartWidth - labelWidth - valueWidth
	for i, r := range rows {
		y := chartMargin + rowHeight*float64(i)
		s.text(labelWidth-8, y+rowHeight*0.65, "end", "label", r.label)
		if r.missing != "" {
			s.text(labelWidth, y+rowHeight*0.65, "start", "muted", r.missing)
			continue
		}
		w := 0.0
		if maxV > 0 {
			w = plot * r.value / maxV
		}
		s.rect(labelWidth, y+4, math.Max(w, 1), rowHeight-8, r.class, r.tooltip)
		s.text(labelWidth+math.Max(w, 1)+6, y+rowHeight*0.65, "start", "value", r.text)
	}
	s.line(labelWidth, chartMargin, labelWidth, height-chartMargin, "axis")
	return s.html()
}

// latencyChart draws p50/p99 of every answer and of the sales alone per
// row on a log scale, since slow-request stages are hundreds of times
// slower than the rest. The two differ where refusals dominate: a setnx run
// that turns 98 % of its buyers away at once looks fast over all answers,
// while its sales wait far longer.
func latencyChart(runs []StageRun) template.HTML {
	type series struct {
		name  string
		class string
		value func(*StageRun) float64
	}
	all := []series{
		{"p50 all answers", "p50", func(r *StageRun) float64 { return r.P50MS }},
		{"p99 all answers", "p99", func(r *StageRun) float64 { return r.P99MS }},
		{"p50 sales", "salep50", func(r *StageRun) float64 { return r.SaleP50MS }},
		{"p99 sales", "salep99", func(r *StageRun) float64 { return r.SaleP99MS }},
	}
	const legend = 22.0
	height := chartMargin*2 + legend + rowHeight*1.8*float64(len(runs)) + 18
	s := newSVG("latency", chartWidth, height, "latency percentiles per stage run, log scale")
	lo, hi := 0.1, 1.0
	for i := range runs {
		hi = math.Max(hi, math.Max(runs[i].P99MS, runs[i].SaleP99MS))
	}
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	plot := chartWidth - labelWidth - valueWidth
	x := func(v float64) float64 {
		v = math.Max(v, lo)
		return labelWidth + plot*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	for i, se := range all {
		lx := labelWidth + float64(i)*130
		s.rect(lx, chartMargin, 12, 10, se.class, "")
		s.text(lx+16, chartMargin+9, "start", "value", se.name)
	}
	top := chartMargin + legend
	bottom := height - chartMargin - 18
	for d := lo; d <= hi*1.0001; d *= 10 {
		s.line(x(d), top, x(d), bottom, "grid")
		s.text(x(d), bottom+14, "middle", "muted", trimFloat(d)+" ms")
	}
	for i := range runs {
		r := &runs[i]
		y := top + rowHeight*1.8*float64(i)
		s.text(labelWidth-8, y+rowHeight*0.75, "end", "label", r.Name())
		if note := r.notRun(); note != "" {
			s.text(labelWidth+4, y+rowHeight*0.75, "start", "muted", note)
			continue
		}
		for j, se := range all {
			v := se.value(r)
			s.rect(labelWidth, y+4+float64(j)*8, x(v)-labelWidth, 7, se.class,
				fmt.Sprintf("%s %s: %.2f ms", r.Name(), se.name, v))
		}
		s.text(x(math.Max(r.P99MS, r.SaleP99MS))+6, y+rowHeight*0.75, "start", "value", fmt.Sprintf("p99 %.1f ms, sales %.1f ms", r.P99MS, r.SaleP99MS))
	}
	return s.html()
}

// timelineChart draws one stage run's sales per second over time, with the
// crash, the first sale after it and any reset marked.
func timelineChart(r *StageRun) template.HTML {
	const (
		width  = 560.0
		height = 180.0
		left   = 48.0
		right  = 12.0
		top    = 24.0
		bottom = 24.0
	)
	tl := r.Timeline
	s := newSVG("timeline", width, height, "sales per second over time: "+r.Name())
	bucketSec := float64(tl.BucketMS) / 1000
	n := len(tl.Sales)
	if n == 0 || bucketSec == 0 {
		s.text(width/2, height/2, "middle", "muted", "no answers")
		return s.html()
	}
	rates := make([]float64, n)
	maxRate := 1.0
	for i, c := range tl.Sales {
		rates[i] = float64(c) / bucketSec
		maxRate = math.Max(maxRate, rates[i])
	}
	maxRate = niceCeil(maxRate)
	spanMS := float64(n * tl.BucketMS)
	plotW, plotH := width-left-right, height-top-bottom
	x := func(atMS float64) float64 { return left + plotW*atMS/spanMS }
	y := func(rate float64) float64 { return top + plotH*(1-rate/maxRate) }

	for _, frac := range []float64{0, 0.5, 1} {
		v := maxRate * frac
		s.line(left, y(v), width-right, y(v), "grid")
		s.text(left-6, y(v)+4, "end", "muted", trimFloat(v))
	}
	for _, sec := range secondTicks(spanMS / 1000) {
		s.text(x(sec*1000), height-bottom+16, "middle", "muted", trimFloat(sec)+"s")
	}
	s.text(left, 12, "start", "muted", "sales/s over time since the stage started")

	var d strings.Builder
	fmt.Fprintf(&d, "M%.1f,%.1f", x(0), y(0))
	for i, v := range rates {
		fmt.Fprintf(&d, " L%.1f,%.1f L%.1f,%.1f", x(float64(i*tl.BucketMS)), y(v), x(float64((i+1)*tl.BucketMS)), y(v))
	}
	fmt.Fprintf(&d, " L%.1f,%.1f Z", x(spanMS), y(0))
	s.path(d.String(), "sales-area")
	oversoldLine(s, tl.Oversold, x, top, plotH, width-right)

	for i, ev := range tl.Events {
		class := strings.TrimSpace("event " + eventClass(ev.Label))
		ex := x(ev.AtMS)
		s.line(ex, top, ex, height-bottom, class)
		// Labels of close events (a crash, then the first sale 200 ms later)
		// go on separate lines; near the right edge they go left of the line.
		ly := top + 10 + float64(i%3)*12
		if ex > width-right-70 {
			s.text(ex-3, ly, "end", class+" event-label", ev.Label)
		} else {
			s.text(ex+3, ly, "start", class+" event-label", ev.Label)
		}
	}
	return s.html()
}

// oversoldLine draws the oversold figure sampled over the stage run as a
// red step line on a scale of its own, labelled on the right, when it ever
// rose above zero.
func oversoldLine(s *svgBuilder, samples []OversoldSample, x func(atMS float64) float64, top, plotH, right float64) {
	most := 0
	for _, o := range samples {
		most = max(most, o.Oversold)
	}
	if most == 0 {
		return
	}
	scale := niceCeil(float64(most))
	y := func(n int) float64 { return top + plotH*(1-float64(n)/scale) }
	var d strings.Builder
	fmt.Fprintf(&d, "M%.1f,%.1f", x(0), y(0))
	prev := 0
	for _, o := range samples {
		fmt.Fprintf(&d, " L%.1f,%.1f L%.1f,%.1f", x(o.AtMS), y(prev), x(o.AtMS), y(o.Oversold))
		prev = o.Oversold
	}
	s.path(d.String(), "oversold-line")
	s.text(right-2, y(most)-4, "end", "oversold-label", fmt.Sprintf("oversold %d", most))
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// secondTicks picks about six round tick positions, in seconds, over span.
func secondTicks(span float64) []float64 {
	step := niceCeil(span / 6)
	var ticks []float64
	for t := 0.0; t <= span+1e-9; t += step {
		ticks = append(ticks, t)
	}
	return ticks
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// eventClass colours a timeline event: the fault (red), what ended it or the
// first sale after it (green), anything else (grey).
func eventClass(label string) string {
	for _, prefix := range []string{"crash", "kill -9", "SIGSTOP", "redis-server killed", "master killed", "master 1 killed", "partition"} {
		if strings.HasPrefix(label, prefix) {
			return "crash"
		}
	}
	for _, prefix := range []string{"first sale", "SIGCONT", "redis-server back", "failover to", "master 1 back", "healed"} {
		if strings.HasPrefix(label, prefix) {
			return "recovered"
		}
	}
	return ""
}
