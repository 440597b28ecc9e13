package docs

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/scenarios"
)

// recordedRun is testdata/workshop-default.json: the stages of one real
// `go run ./cmd/workshop` of the default scenario, cut from its
// report.json, whose figures the README's and docs/workshop.md's results
// tables show. A new recording replaces the file; this test then names
// every row to rewrite.
type recordedRun struct {
	Stages []struct {
		Stage          string   `json:"stage"`
		Via            string   `json:"via"`
		Replicas       int      `json:"replicas"`
		Requests       int      `json:"requests"`
		Sales          int      `json:"sales"`
		SoldOut        int      `json:"sold_out"`
		Busy           int      `json:"busy"`
		Errors         int      `json:"errors"`
		SalesPerSec    float64  `json:"sales_per_sec"`
		P50ms          float64  `json:"p50_ms"`
		P99ms          float64  `json:"p99_ms"`
		SaleP50ms      float64  `json:"sale_p50_ms"`
		SaleP99ms      float64  `json:"sale_p99_ms"`
		Oversold       int      `json:"oversold"`
		Consistent     bool     `json:"consistent"`
		ForeignUnlocks int      `json:"foreign_unlocks"`
		Stuck          bool     `json:"stuck"`
		RecoveryMS     *float64 `json:"recovery_ms"`
	} `json:"stages"`
}

func loadRecordedRun(t *testing.T) recordedRun {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "workshop-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run recordedRun
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	return run
}

// tableRows are the rows of the Markdown table whose header starts with
// "| stage |" in page, the first one.
func tableRows(t *testing.T, page string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, page))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "| stage |") && len(rows) == 0:
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "| "):
			rows = append(rows, line)
		case in:
			return rows
		}
	}
	return rows
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func bold(n int) string {
	if n > 0 {
		return fmt.Sprintf("**%d**", n)
	}
	return "0"
}

// TestResultTablesMatchTheDefaultScenarioAndTheRecordedRun: the README's
// and docs/workshop.md's results tables have one row per run of the
// default scenario, in its order, and every figure is the recorded run's.
func TestResultTablesMatchTheDefaultScenarioAndTheRecordedRun(t *testing.T) {
	sc, _, err := scenarios.Load("")
	if err != nil {
		t.Fatal(err)
	}
	run := loadRecordedRun(t)
	if len(run.Stages) != len(sc.Runs) {
		t.Fatalf("the recorded run has %d stages, the default scenario %d runs: record it again", len(run.Stages), len(sc.Runs))
	}
	var short, full []string
	for i, s := range run.Stages {
		if s.Stage != sc.Runs[i].Stage {
			t.Fatalf("run %d: recorded %s, the default scenario runs %s: record it again", i+1, s.Stage, sc.Runs[i].Stage)
		}
		label := "`" + s.Stage + "`"
		if s.Via == "one-replica" {
			label += " (one replica)"
		}
		crash := "-"
		switch {
		case s.Stuck:
			crash = "**stuck until reset**"
		case s.RecoveryMS != nil:
			crash = fmt.Sprintf("sells again after %.0f ms", *s.RecoveryMS)
		}
		rate := math.Round(s.SalesPerSec)
		short = append(short, fmt.Sprintf("| %s | %.0f | %s | %s | %s | %s |", label, rate, bold(s.Oversold), yesNo(s.Consistent), bold(s.ForeignUnlocks), crash))
		full = append(full, fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %.0f | %.1f | %.1f | %.1f / %.1f | %s | %s | %s | %s |",
			label, s.Replicas, s.Requests, s.Sales, s.SoldOut, s.Busy, s.Errors, rate, s.P50ms, s.P99ms, s.SaleP50ms, s.SaleP99ms,
			bold(s.Oversold), yesNo(s.Consistent), bold(s.ForeignUnlocks), crash))
	}
	for page, want := range map[string][]string{"README.md": short, "docs/workshop.md": full} {
		got := tableRows(t, page)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s's results table is not the recorded run's (docs/testdata/workshop-default.json); want:\n%s\n\ngot:\n%s", page, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
	}
}
