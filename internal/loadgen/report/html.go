package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
)

//go:embed report.html.tmpl
var reportTemplateText string

// ReportCSS is report.html's stylesheet, which the workshop's live page
// shares, so its charts look as the report's.
//
//go:embed report.css
var ReportCSS string

// htmlRow is one stage run as the HTML template shows it.
type htmlRow struct {
	*StageRun
	Label  string
	NotRun string
	// Cells are the results table's, after the label (columns.go).
	Cells      []htmlCell
	Timeline   template.HTML
	FaultsText string
	TraceHTML  template.HTML
	ShardsHTML template.HTML
}

type htmlPage struct {
	*Report
	// Results is the results table (ResultsHTML).
	Results       template.HTML
	Rows          []htmlRow
	FaultRows     []faultRow
	OrderRows     []orderRow
	StreamTable   template.HTML
	Failed        int
	SalesChart    template.HTML
	OversoldChart template.HTML
	LatencyChart  template.HTML
	ParamsJSON    string
	Style         template.CSS
}

// writeHTML is Report.WriteHTML.
func writeHTML(rep *Report, w io.Writer) error {
	tmpl, err := template.New("report").Parse(reportTemplateText)
	if err != nil {
		return fmt.Errorf("parse report template: %w", err)
	}
	page := htmlPage{Report: rep, Style: template.CSS(ReportCSS)} //nolint:gosec // our own embedded stylesheet
	var heads []string
	heads, page.Rows = resultRows(rep)
	if page.Results, err = resultsTable(heads, page.Rows); err != nil {
		return err
	}
	var sales, oversold []barRow
	for i := range page.Rows {
		row := &page.Rows[i]
		r := row.StageRun
		row.FaultsText = r.Faults.Describe()
		if !r.Passed() || r.Error != "" {
			page.Failed++
		}
		if row.NotRun == "" {
			row.Timeline = timelineChart(r)
		}
		if row.ShardsHTML, err = ShardsHTML(r.Shards); err != nil {
			return err
		}
		if row.TraceHTML, err = TraceHTML(r.Trace); err != nil {
			return err
		}
		sales = append(sales, barRow{
			label: row.Label, missing: row.NotRun, value: r.SalesPerSec, class: "bar-sales",
			text:    fmt.Sprintf("%.0f/s", r.SalesPerSec),
			tooltip: fmt.Sprintf("%s: %d sales in %.2fs", row.Label, r.Sales, r.ElapsedMS/1000),
		})
		overClass := "bar-ok"
		if r.Oversold > 0 {
			overClass = "bar-bad"
		}
		oversold = append(oversold, barRow{
			label: row.Label, missing: row.NotRun, value: float64(r.Oversold), class: overClass,
			text:    fmt.Sprintf("%d", r.Oversold),
			tooltip: fmt.Sprintf("%s: sold %d of %d", row.Label, r.Audit.Sold, r.Audit.Initial),
		})
	}
	page.FaultRows = faultRows(rep)
	page.OrderRows = orderRows(rep)
	streams, err := streamTable(rep)
	if err != nil {
		return err
	}
	page.StreamTable = streams
	page.SalesChart = barChart("sales-per-sec", "sales per second per stage run", sales)
	page.OversoldChart = barChart("oversold", "units oversold per stage run", oversold)
	page.LatencyChart = latencyChart(rep.Stages)
	params, err := json.MarshalIndent(rep.Params, "", "  ")
	if err != nil {
		return fmt.Errorf("encode params: %w", err)
	}
	page.ParamsJSON = string(params)
	if err := tmpl.Execute(w, page); err != nil {
		return fmt.Errorf("render report.html: %w", err)
	}
	return nil
}

// resultRows are rep's runs as the results table shows them, after the
// table's heads (the stage's excepted).
func resultRows(rep *Report) ([]string, []htmlRow) {
	cols := resultColumns(rep)
	rows := make([]htmlRow, len(rep.Stages))
	for i := range rep.Stages {
		r := &rep.Stages[i]
		rows[i] = htmlRow{StageRun: r, Label: r.Heading(), NotRun: r.notRun()}
		if rows[i].NotRun == "" {
			rows[i].Cells = htmlCells(cols, r)
		}
	}
	return htmlHeads(cols), rows
}

var resultsTemplate = template.Must(template.New("results").Parse(`<table class="results" data-results>
<thead><tr><th>stage</th>{{range .Heads}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}{{if .NotRun}}<tr data-row="{{.Stage}}"><td>{{.Label}}</td><td class="left muted" colspan="{{len $.Heads}}">{{.NotRun}}</td></tr>
{{else}}<tr data-row="{{.Stage}}"><td>{{.Label}}</td>{{range .Cells}}<td{{with .Class}} class="{{.}}"{{end}}>{{.Value}}</td>{{end}}</tr>
{{end}}{{end}}</tbody>
</table>`))

func resultsTable(heads []string, rows []htmlRow) (template.HTML, error) {
	var b strings.Builder
	if err := resultsTemplate.Execute(&b, struct {
		Heads []string
		Rows  []htmlRow
	}{heads, rows}); err != nil {
		return "", fmt.Errorf("render the results table: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // rendered by html/template
}

// ResultsHTML is report.html's results table of rep's runs, one column
// per result column (columns.go); the workshop's live page shows it as
// its stages end.
func ResultsHTML(rep *Report) (template.HTML, error) {
	return resultsTable(resultRows(rep))
}

var streamTemplate = template.Must(template.New("streams").Parse(`<table class="streams" data-streams>
<thead><tr><th>stage</th><th class="left">read</th><th>length</th><th>undelivered</th><th>pending</th><th>oldest pending s</th><th>dead letters</th><th>lag p50 ms</th><th>lag p99 ms</th></tr></thead>
<tbody>{{range .}}<tr data-stream="{{.Label}}"><td>{{.Label}}</td><td class="left">{{.When}}</td><td>{{.Length}}</td><td>{{.Undelivered}}</td><td>{{.Pending}}</td><td>{{printf "%.1f" .OldestPendingS}}</td><td>{{.DeadLetters}}</td><td>{{printf "%.1f" .LagP50MS}}</td><td>{{printf "%.1f" .LagP99MS}}</td></tr>
{{end}}</tbody></table>`))

// StreamHTML is the table of rows' order streams; "" without any.
func StreamHTML(rows []StreamRow) (template.HTML, error) {
	if len(rows) == 0 {
		return "", nil
	}
	var b strings.Builder
	if err := streamTemplate.Execute(&b, rows); err != nil {
		return "", fmt.Errorf("render the stream table: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // rendered by html/template
}

// StreamNow is the live page's line of a running async stage's stream at
// the latest audit; none for another stage.
func StreamNow(label string, v *StreamView) []StreamRow {
	if v == nil {
		return nil
	}
	return []StreamRow{{Label: label, When: "now", StreamView: v}}
}

// streamTable is report.html's order stream table over every async run.
func streamTable(rep *Report) (template.HTML, error) {
	var rows []StreamRow
	for i := range rep.Stages {
		rows = append(rows, rep.Stages[i].StreamRows()...)
	}
	return StreamHTML(rows)
}

// shardsTemplate draws each master's part of a stage's commands as a bar.
var shardsTemplate = template.Must(template.New("shards").Parse(`<table class="shards" data-shards>
<thead><tr><th>master</th><th>commands</th><th class="left">share</th><th>cores</th><th>segments</th></tr></thead>
<tbody>{{range .}}<tr data-shard="{{.Addr}}"><td>{{.Addr}}</td><td>{{.Commands}}</td><td class="left"><svg width="100" height="10" role="img" aria-label="{{printf "%.0f" .Percent}}%"><rect class="bar-sales" width="{{printf "%.1f" .Percent}}" height="10"/></svg> {{printf "%.0f" .Percent}}%</td><td>{{printf "%.2f" .Cores}}</td><td>{{len .Segments}}</td></tr>
{{end}}</tbody></table>`))

// ShardsHTML is the table of what each master of a Redis Cluster did in a
// stage run, with each one's share of the commands; "" off a cluster.
func ShardsHTML(shards []ShardLoad) (template.HTML, error) {
	if len(shards) == 0 {
		return "", nil
	}
	var total int64
	for _, s := range shards {
		total += s.Commands
	}
	type row struct {
		ShardLoad
		Percent float64
	}
	rows := make([]row, len(shards))
	for i, s := range shards {
		rows[i].ShardLoad = s
		if total > 0 {
			rows[i].Percent = 100 * float64(s.Commands) / float64(total)
		}
	}
	var b strings.Builder
	if err := shardsTemplate.Execute(&b, rows); err != nil {
		return "", fmt.Errorf("render the shard table: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // rendered by html/template
}

var traceTemplate = template.Must(template.New("trace").Funcs(template.FuncMap{
	"join": func(s []string) string { return strings.Join(s, " ") },
}).Parse(`<div class="trace">
<p class="muted">what one {{if .Sold}}sale{{else}}attempt (no sale traced){{end}} sent to Redis, recorded by {{.Replica}}: <b>{{.RoundTrips}} round trip{{if ne .RoundTrips 1}}s{{end}}</b>{{with .Shows}} · shows {{join .}}{{end}} · answer {{.Status}} <code>{{printf "%s" .Answer}}</code></p>
<div class="scroll"><table class="results trace-calls">
<thead><tr><th>#</th><th>command</th><th>keys</th><th>arguments</th><th>reply</th><th>ms</th></tr></thead>
<tbody>
{{range .Calls}}<tr{{if .Background}} class="background"{{end}}><td>{{if .Background}}watchdog{{else}}{{.RoundTrip}}{{end}}</td><td class="left">{{.Command}}{{with .Script}} <b>{{.}}</b>{{end}}</td><td class="left">{{join .Keys}}</td><td class="left">{{join .Args}}</td><td class="left">{{.Reply}}</td><td>{{printf "%.2f" .TookMS}}</td></tr>
{{end}}</tbody></table></div>
</div>`))

// TraceHTML renders a traced sale's commands as a table: command (a
// script by its name), keys, arguments, reply, and the round trip each
// belongs to; a renewal the watchdog sent meanwhile is marked.
func TraceHTML(t *SaleTrace) (template.HTML, error) {
	if t == nil {
		return "", nil
	}
	var b strings.Builder
	if err := traceTemplate.Execute(&b, t); err != nil {
		return "", fmt.Errorf("render trace: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // rendered by html/template
}

// TimelineChart is the report's sales-over-time chart of a row, for pages
// that show a stage run while it runs.
func TimelineChart(row *StageRun) template.HTML { return timelineChart(row) }
