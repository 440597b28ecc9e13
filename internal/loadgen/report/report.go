// Package report is what a run measured and how it is written out: the
// records (Report, its StageRun rows, and the records each part of a run
// fills: the audit, the crash step's, the fault step's, the stream's,
// the trace, the shards' load) and the writers (report.json, report.html
// with its SVG charts, the terminal tables). The results tables' columns
// are declared by the records they show, each beside its fields
// (columns.go), so a new column is its record's change.
//
// report.json's schema is the records' JSON encoding; the goldens in
// loadgen's reportjson_golden_test.go pin it. report must not import the
// rest of loadgen (the runner, the attack, the observers, the fault steps,
// the checks), vegeta, HTTP or Redis clients: it renders records and
// nothing fills them here. The stores' packages it names (inventory,
// orders, asyncorders) are for the result types the shop's HTTP API
// returns in its audit.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// Report is everything a run measured; it is written as report.json and
// rendered as the table and report.html.
type Report struct {
	Scenario     string    `json:"scenario"`
	ScenarioFile string    `json:"scenario_file,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	FinishedAt   time.Time `json:"finished_at"`
	WallSeconds  float64   `json:"wall_seconds"`
	Params       Params    `json:"params"`
	Machine      Machine   `json:"machine"`
	Redis        Component `json:"redis"`
	Proxy        Component `json:"proxy"`
	// Orders says where the order stages kept their orders.
	Orders          string     `json:"orders,omitempty"`
	Stages          []StageRun `json:"stages"`
	ExpectationsMet bool       `json:"expectations_met"`
}

// Params are the run's inputs.
type Params struct {
	Target      string        `json:"target"`
	ReplicaURLs []string      `json:"replica_urls,omitempty"`
	Replicas    int           `json:"replicas"`
	SKU         string        `json:"sku"`
	Scenario    plan.Scenario `json:"scenario"`
}

// Component names a piece of the set-up the figures depend on.
type Component struct {
	Kind    string `json:"kind"`
	Version string `json:"version,omitempty"`
	Addr    string `json:"addr,omitempty"`
	Note    string `json:"note,omitempty"`
}

func (c Component) String() string {
	s := c.Kind
	if c.Version != "" {
		s += " " + c.Version
	}
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

// ErrExpectationsNotMet is Verdict's error: the run went through, and some
// row did not show what its scenario expected. Commands exit with
// ExitExpectationsNotMet on it, so scripts and CI can tell it from a run
// that broke.
var ErrExpectationsNotMet = errors.New("expectations not met")

// ExitExpectationsNotMet is the exit status of a run whose expectations
// were not met (1 is a run that failed, 2 a usage error, 130 a run
// interrupted).
const ExitExpectationsNotMet = 3

// Verdict is nil when every expectation was met, else an error wrapping
// ErrExpectationsNotMet that names the rows that missed.
func (rep *Report) Verdict() error {
	if rep.ExpectationsMet {
		return nil
	}
	var missed []string
	for i := range rep.Stages {
		if r := &rep.Stages[i]; r.Error != "" || !r.Passed() {
			missed = append(missed, r.Name())
		}
	}
	if len(missed) == 0 && !rep.Judged() {
		return fmt.Errorf("%w: none was judged (every stage run that had expectations was skipped)", ErrExpectationsNotMet)
	}
	return fmt.Errorf("%w: %s", ErrExpectationsNotMet, strings.Join(missed, ", "))
}

// Judged reports whether any expectation was judged.
func (rep *Report) Judged() bool {
	for i := range rep.Stages {
		if len(rep.Stages[i].Checks) > 0 {
			return true
		}
	}
	return false
}

// WriteFiles writes report.json and report.html into dir.
func (rep *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report dir: %w", err)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report.json: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return fmt.Errorf("create report.html: %w", err)
	}
	if err := rep.WriteHTML(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write report.html: %w", err)
	}
	return nil
}

// ReadReport reads a report.json written by WriteFiles.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	return &rep, nil
}

// Publish writes report.json and report.html into dir, then prints the
// table and where the report is.
func Publish(rep *Report, dir string, w io.Writer) error {
	if err := rep.WriteFiles(dir); err != nil {
		return err
	}
	if err := rep.WriteTable(w); err != nil {
		return err
	}
	abs, err := filepath.Abs(filepath.Join(dir, "report.html"))
	if err != nil {
		return fmt.Errorf("report path: %w", err)
	}
	_, err = fmt.Fprintf(w, "report: %s (and report.json next to it)\n", abs)
	return err
}

// WriteTable prints the results: the load each stage run took and what
// it showed, each table within tableWidth columns, the texts that do not
// fit (why a stage did not run, the checks that missed) whole below it.
func (rep *Report) WriteTable(w io.Writer) error { return writeTable(rep, w) }

// WriteHTML renders the self-contained report page: inline CSS and SVG only,
// and a Content-Security-Policy that forbids every fetch, so it opens from
// disk without a network.
func (rep *Report) WriteHTML(w io.Writer) error { return writeHTML(rep, w) }
