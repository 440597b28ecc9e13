package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// The live page's results table shows an order stage's duplicate orders
// and undersold units, and "-" for a stage without orders.
func TestLivePageShowsOrders(t *testing.T) {
	l := &live{scenario: "orders", runs: 2, renewals: newRenewalCounter()}
	o := inventory.OrderCounts{Counts: orders.Counts{Orders: 150, Units: 150, Buyers: 57}, DuplicateOrders: 93, Undersold: 2}
	l.StageDone(report.StageRun{StageID: report.StageID{Index: 0, Stage: "one-per-user-naive"}, Answers: report.Answers{Sales: 150}, Outcome: report.Outcome{Audit: report.Audit{Initial: 152, Orders: &o}}})
	l.StageDone(report.StageRun{StageID: report.StageID{Index: 1, Stage: "atomic"}, Answers: report.Answers{Sales: 10}, Outcome: report.Outcome{Audit: report.Audit{Initial: 10}}})
	page, err := l.render()
	if err != nil {
		t.Fatal(err)
	}
	cellsOf := func(re string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<t[dh][^>]*>(.*?)</t[dh]>`).FindAllStringSubmatch(regexp.MustCompile(re).FindString(string(page)), -1) {
			out = append(out, m[1])
		}
		return out
	}
	heads := cellsOf(`<thead><tr><th>stage</th>.*</tr></thead>`)
	column := func(stage, head string) string {
		i := slices.Index(heads, head)
		row := cellsOf(`<tr data-row="` + stage + `">.*</tr>`)
		if i < 0 || i >= len(row) {
			t.Fatalf("no %q column in %q, or %s's row %q is short", head, heads, stage, row)
		}
		return row[i]
	}
	for _, c := range []struct{ stage, head, want string }{
		{"one-per-user-naive", "duplicate orders", "93"},
		{"one-per-user-naive", "undersold", "2"},
		{"atomic", "duplicate orders", "-"},
		{"atomic", "undersold", "-"},
	} {
		if got := column(c.stage, c.head); got != c.want {
			t.Errorf("%s's %s: %q, want %q", c.stage, c.head, got, c.want)
		}
	}
}

// A finished async run's section on the live page has its order stream:
// the most it reached while running and what was left after draining.
func TestLivePageShowsTheOrderStream(t *testing.T) {
	l := &live{scenario: "async", runs: 1, renewals: newRenewalCounter()}
	l.StageDone(report.StageRun{
		StageID: report.StageID{Index: 0, Stage: "async-stream"},
		Answers: report.Answers{Sales: 300},
		Drain:   report.Drain{DrainMS: 200, StreamWhileRunning: &report.StreamView{Length: 250, Pending: 9, Samples: 8}},
		Outcome: report.Outcome{Audit: report.Audit{Initial: 300, Stream: &asyncorders.Stats{Length: 300, DeadLetters: 2}}},
	})
	page, err := l.render()
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`<tr data-stream="async-stream">.*?</tr>`).FindAllString(string(page), -1)
	if len(rows) != 2 || !strings.Contains(rows[0], "<td>9</td>") || !strings.Contains(rows[1], "after draining") || !strings.Contains(rows[1], "<td>2</td>") {
		t.Errorf("stream rows %q", rows)
	}
}
