package loadgen

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
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
	Label       string
	NotRun      string
	Foreign     string
	CrashText   string
	Passed      bool
	Timeline    template.HTML
	FaultsText  string
	SalesPerSec string
	TraceHTML   template.HTML
	ShardsHTML  template.HTML
}

type htmlPage struct {
	*Report
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

// WriteHTML renders the self-contained report page: inline CSS and SVG only,
// and a Content-Security-Policy that forbids every fetch, so it opens from
// disk without a network.
func (rep *Report) WriteHTML(w io.Writer) error {
	tmpl, err := template.New("report").Parse(reportTemplateText)
	if err != nil {
		return fmt.Errorf("parse report template: %w", err)
	}
	page := htmlPage{Report: rep, Style: template.CSS(ReportCSS)} //nolint:gosec // our own embedded stylesheet
	var sales, oversold []barRow
	for i := range rep.Stages {
		r := &rep.Stages[i]
		row := htmlRow{
			StageRun:    r,
			Label:       r.Heading(),
			NotRun:      r.notRun(),
			Foreign:     r.foreignText(),
			CrashText:   r.CrashSummary(),
			Passed:      r.Passed() && r.Error == "",
			FaultsText:  r.Faults.Describe(),
			SalesPerSec: fmt.Sprintf("%.0f", r.SalesPerSec),
		}
		if !row.Passed {
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
		page.Rows = append(page.Rows, row)
	}
	page.FaultRows = rep.faultRows()
	page.OrderRows = rep.orderRows()
	streams, err := rep.streamTable()
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
