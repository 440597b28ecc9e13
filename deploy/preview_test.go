package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var preview = flag.String("preview", "", "TestLiveStack: also render the dashboard's panels from the live Prometheus into this PNG (headless Chromium)")

// previewPanel is what the preview draws of a dashboard panel.
type previewPanel struct {
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	GridPos     struct{ X, Y, W, H int } `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds *struct {
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
			Mappings []struct {
				Options map[string]struct {
					Text string `json:"text"`
				} `json:"options"`
			} `json:"mappings"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

var palette = []string{"#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9", "#FADE2A", "#37872D", "#C4162A"}

var colours = map[string]string{"green": "#73BF69", "red": "#F2495C", "blue": "#5794F2"}

const (
	previewWidth = 1600
	gridRow      = 34 // pixels per grid unit of height
)

// renderPreview draws every panel of grafana/dashboards/lockstep.json from
// the same PromQL on the live Prometheus, laid out on the dashboard's grid,
// into an HTML page, and has headless Chromium screenshot it. It is not
// Grafana (which no Debian package provides): a faithful rendering of what
// the queries return, labelled as such.
func renderPreview(t *testing.T, s *stack, start, end time.Time, png string) {
	t.Helper()
	chromium := tool(t, "chromium")
	raw, err := os.ReadFile(repoPath("grafana", "dashboards", "lockstep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels      []previewPanel `json:"panels"`
		Annotations struct {
			List []struct {
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	regions := stageRegions(t, s, d.Annotations.List[0].Expr, start, end)

	var b strings.Builder
	bottom := 0
	for _, p := range d.Panels {
		bottom = max(bottom, p.GridPos.Y+p.GridPos.H)
	}
	height := bottom*gridRow + 70
	fmt.Fprintf(&b, `<!doctype html><html><head><meta charset="utf-8"><style>
body{margin:0;background:#111217;color:#ccccdc;font:12px "DejaVu Sans",sans-serif;width:%dpx;height:%dpx;position:relative;overflow:hidden}
.head{height:54px;padding:8px 12px;box-sizing:border-box}.head b{font-size:17px;color:#fff}.head span{color:#8e8e9a}
.p{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:3px;box-sizing:border-box;overflow:hidden}
.t{padding:5px 8px;font-weight:bold;color:#d8d9da;white-space:nowrap}
.row{position:absolute;font-size:15px;font-weight:bold;color:#d8d9da;padding-left:6px}
.stats{display:flex;flex-wrap:wrap;gap:4px;padding:0 6px}.stat{flex:1 1 0;min-width:70px;padding:6px;border-radius:2px;color:#fff;text-align:center}
.stat small{display:block;font-size:11px;opacity:.9}.stat div{font-size:22px;font-weight:bold}
.lg{padding:0 8px;font-size:11px;line-height:15px}.lg i{display:inline-block;width:12px;height:3px;margin:0 4px 3px 8px}
</style></head><body><div class="head"><b>lockstep</b> <span>&nbsp;dashboard preview: every panel of grafana/dashboards/lockstep.json, its PromQL run on a live Prometheus
(go test ./deploy -run TestLiveStack -preview FILE: setnx and fenced by k6's stage walk, naive, setnx-expire, watchdog, segmented, one-per-user-naive and async-stream (two order workers, one malformed entry) by the load generator, atomic by k6's spike). Drawn by deploy's preview, not by Grafana.</span></div>
`, previewWidth, height)
	col := float64(previewWidth) / 24
	for _, p := range d.Panels {
		left, top := float64(p.GridPos.X)*col, float64(p.GridPos.Y*gridRow+56)
		w, h := float64(p.GridPos.W)*col-6, float64(p.GridPos.H*gridRow-6)
		if p.Type == "row" {
			fmt.Fprintf(&b, `<div class="row" style="left:%.0fpx;top:%.0fpx">%s</div>`+"\n", left, top+6, html.EscapeString(p.Title))
			continue
		}
		fmt.Fprintf(&b, `<div class="p" style="left:%.0fpx;top:%.0fpx;width:%.0fpx;height:%.0fpx"><div class="t">%s</div>`, left, top, w, h, html.EscapeString(p.Title))
		var series []namedSeries
		for _, q := range p.Targets {
			for _, rs := range s.queryRange(t, s.grafanaExpr(q.Expr, ".*"), start, end) {
				series = append(series, namedSeries{legend(q.LegendFormat, rs.Metric), points(rs)})
			}
		}
		if p.Type == "stat" {
			b.WriteString(statHTML(p, series))
		} else {
			b.WriteString(chartSVG(p.FieldConfig.Defaults.Unit, series, regions, start, end, w, h-28))
		}
		b.WriteString("</div>\n")
	}
	b.WriteString("</body></html>\n")

	dir := t.TempDir()
	page := filepath.Join(dir, "preview.html")
	writeFile(t, page, []byte(b.String()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	abs, err := filepath.Abs(png)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), fmt.Sprintf("--window-size=%d,%d", previewWidth, height),
		"--screenshot="+abs, "file://"+page)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	t.Logf("dashboard preview: %s", abs)
}

type point struct {
	t time.Time
	v float64
}

type namedSeries struct {
	name   string
	points []point
}

func points(rs rangeSeries) []point {
	var out []point
	for _, v := range rs.Values {
		ts, _ := v[0].(float64)
		f, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		out = append(out, point{time.UnixMilli(int64(ts * 1000)), f})
	}
	return out
}

var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

func legend(format string, labels map[string]string) string {
	return legendLabel.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendLabel.FindStringSubmatch(m)[1]]
	})
}

func statHTML(p previewPanel, series []namedSeries) string {
	sort.Slice(series, func(i, j int) bool { return series[i].name < series[j].name })
	var b strings.Builder
	b.WriteString(`<div class="stats">`)
	for _, s := range series {
		if len(s.points) == 0 {
			continue
		}
		v := s.points[len(s.points)-1].v
		colour := colours["blue"]
		if th := p.FieldConfig.Defaults.Thresholds; th != nil {
			for _, step := range th.Steps {
				if step.Value == nil || v >= *step.Value {
					colour = colours[step.Color]
				}
			}
		}
		text := formatValue(v, p.FieldConfig.Defaults.Unit)
		for _, m := range p.FieldConfig.Defaults.Mappings {
			if o, ok := m.Options[strconv.FormatFloat(v, 'f', 0, 64)]; ok {
				text = o.Text
			}
		}
		fmt.Fprintf(&b, `<div class="stat" style="background:%s"><small>%s</small><div>%s</div></div>`, colour, html.EscapeString(s.name), text)
	}
	b.WriteString("</div>")
	return b.String()
}

// stageRegion is a span during which a stage received requests.
type stageRegion struct {
	stage      string
	start, end time.Time
}

func stageRegions(t *testing.T, s *stack, expr string, start, end time.Time) []stageRegion {
	var out []stageRegion
	for _, rs := range s.queryRange(t, s.grafanaExpr(expr, ".*"), start, end) {
		var r *stageRegion
		for _, p := range points(rs) {
			if r != nil && p.t.Sub(r.end) <= 2*scrapeInterval {
				r.end = p.t
				continue
			}
			out = append(out, stageRegion{rs.Metric["stage"], p.t, p.t})
			r = &out[len(out)-1]
		}
	}
	return out
}

func formatValue(v float64, unit string) string {
	switch unit {
	case "s":
		switch {
		case v == 0:
			return "0"
		case v < 0.001:
			return fmt.Sprintf("%.0fµs", v*1e6)
		case v < 1:
			return fmt.Sprintf("%.0fms", v*1e3)
		}
		return fmt.Sprintf("%.1fs", v)
	case "reqps", "ops":
		suffix := map[string]string{"reqps": " req/s", "ops": " ops/s"}[unit]
		if v >= 1000 {
			return fmt.Sprintf("%.1fk%s", v/1000, suffix)
		}
		return fmt.Sprintf("%.0f%s", v, suffix)
	}
	if v >= 1000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// chartSVG draws a time series panel: y from 0, the stage regions shaded,
// one line per series, the legend below.
func chartSVG(unit string, series []namedSeries, regions []stageRegion, start, end time.Time, w, h float64) string {
	sort.Slice(series, func(i, j int) bool { return series[i].name < series[j].name })
	legendRows := int(math.Ceil(float64(len(series)) / 4))
	plotH := h - float64(legendRows)*15 - 22
	const padL, padR = 62.0, 10.0
	plotW := w - padL - padR
	top := 0.0
	for _, s := range series {
		for _, p := range s.points {
			top = max(top, p.v)
		}
	}
	if top == 0 {
		top = 1
	}
	top *= 1.1
	span := end.Sub(start).Seconds()
	x := func(ts time.Time) float64 { return padL + ts.Sub(start).Seconds()/span*plotW }
	y := func(v float64) float64 { return 6 + plotH - v/top*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" style="display:block">`, w, plotH+22)
	for i, r := range regions {
		x0, x1 := x(r.start), x(r.end)
		fmt.Fprintf(&b, `<rect x="%.1f" y="6" width="%.1f" height="%.1f" fill="rgba(255,176,0,%s)"/>`, x0, max(x1-x0, 1), plotH, []string{"0.07", "0.13"}[i%2])
		fmt.Fprintf(&b, `<text x="%.1f" y="16" fill="#b0a070" font-size="9">%s</text>`, x0+2, html.EscapeString(r.stage))
	}
	for i := 0; i <= 2; i++ {
		v := top * float64(i) / 2
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#2c3235"/>`, padL, padL+plotW, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" fill="#8e8e9a" font-size="10" text-anchor="end">%s</text>`, padL-4, y(v)+3, formatValue(v, unit))
	}
	for i := 0; i <= 3; i++ {
		ts := start.Add(time.Duration(float64(end.Sub(start)) * float64(i) / 3))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#8e8e9a" font-size="10" text-anchor="middle">%s</text>`, x(ts), plotH+19, ts.UTC().Format("15:04:05"))
	}
	for i, s := range series {
		var path strings.Builder
		for j, p := range s.points {
			cmd := "L"
			if j == 0 || p.t.Sub(s.points[j-1].t) > 2*scrapeInterval {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, x(p.t), y(p.v))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, path.String(), palette[i%len(palette)])
	}
	b.WriteString("</svg><div class=\"lg\">")
	if len(series) == 0 {
		b.WriteString("No data")
	}
	for i, s := range series {
		fmt.Fprintf(&b, `<i style="background:%s"></i>%s`, palette[i%len(palette)], html.EscapeString(s.name))
	}
	b.WriteString("</div>")
	return b.String()
}
