package loadgen

import (
	"github.com/lockstep/lockstep/internal/loadgen/plan"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
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

// ExitStatus is the exit status of a command that ran a scenario and ended
// with err: flagenv.ExitInterrupted when interrupted, ExitExpectationsNotMet,
// flagenv.ExitUsage for a scenario naming a stage the shop does not have,
// else flagenv.ExitStatus's.
func ExitStatus(err error, interrupted bool) int {
	switch {
	case interrupted:
		return flagenv.ExitInterrupted
	case errors.Is(err, ErrExpectationsNotMet):
		return ExitExpectationsNotMet
	case errors.Is(err, ErrUnknownStage):
		return flagenv.ExitUsage
	}
	return flagenv.ExitStatus(err)
}

// Verdict is nil when every expectation was met, else an error wrapping
// ErrExpectationsNotMet that names the rows that missed.
func (rep *Report) Verdict() error {
	if rep.ExpectationsMet {
		return nil
	}
	var missed []string
	for i := range rep.Stages {
		if r := &rep.Stages[i]; r.Error != "" || !r.Passed() {
			missed = append(missed, r.label())
		}
	}
	if len(missed) == 0 && !rep.judged() {
		return fmt.Errorf("%w: none was judged (every stage run that had expectations was skipped)", ErrExpectationsNotMet)
	}
	return fmt.Errorf("%w: %s", ErrExpectationsNotMet, strings.Join(missed, ", "))
}

// judged reports whether any expectation was judged.
func (rep *Report) judged() bool {
	for i := range rep.Stages {
		if len(rep.Stages[i].Checks) > 0 {
			return true
		}
	}
	return false
}

// StageRun is one row of the results: one stage under one load shape.
type StageRun struct {
	Index int `json:"index"`
	// Label names the row when it is not the stage alone (RunSpec.Label).
	Label     string `json:"label,omitempty"`
	Stage     string `json:"stage"`
	Title     string `json:"title,omitempty"`
	Article   string `json:"article,omitempty"`
	Mechanism string `json:"mechanism,omitempty"`
	Defect    string `json:"defect,omitempty"`
	Via       string `json:"via"`
	// DrainMS is how long the async stage's workers took, after the load,
	// to deliver every entry (0 for the other stages).
	DrainMS float64 `json:"drain_ms,omitempty"`
	// OrdersAtLoadEnd are the orders an async stage's workers had written
	// when its load ended; DrainOrdersPerSec the orders they wrote during
	// the drain, per second of it: their sustained rate once the load ended.
	OrdersAtLoadEnd   int64   `json:"orders_at_load_end,omitempty"`
	DrainOrdersPerSec float64 `json:"drain_orders_per_s,omitempty"`
	// WorkersHeld: the order workers were held through the load
	// (RunSpec.HoldWorkers), so the drain wrote every order.
	WorkersHeld bool `json:"workers_held,omitempty"`
	// StreamWhileRunning is the most an async stage's stream reached while
	// its load (or fault step) ran, figure by figure, from the audits
	// polled then.
	StreamWhileRunning *StreamView `json:"stream_while_running,omitempty"`
	// Skipped says why a run did not happen by design (stage unavailable);
	// Error says why it broke off.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Interrupted: the run was stopped (Ctrl-C) during this stage; its
	// figures cover the load until then.
	Interrupted bool `json:"interrupted,omitempty"`

	Replicas int         `json:"replicas"`
	Rate     string      `json:"rate"`
	Workers  int         `json:"workers"`
	Faults   plan.Faults `json:"faults"`

	Requests int `json:"requests"`
	Sales    int `json:"sales"`
	SoldOut  int `json:"sold_out"`
	Busy     int `json:"busy"`
	// AlreadyBought are an order stage's 409 already_bought answers (a
	// buyer's second purchase refused), not counted in Busy.
	AlreadyBought  int      `json:"already_bought"`
	Errors         int      `json:"errors"`
	ErrorSamples   []string `json:"error_samples,omitempty"`
	ElapsedMS      float64  `json:"elapsed_ms"`
	SalesPerSec    float64  `json:"sales_per_sec"`
	RequestsPerSec float64  `json:"requests_per_sec"`
	// Latency quantiles of every answer (refusals included), and of the
	// sales alone. At a fixed rate they count from each request's intended
	// send time; ServiceP50MS/ServiceP99MS are then vegeta's uncorrected
	// figures, from when a worker sent it.
	P50MS        float64  `json:"p50_ms"`
	P90MS        float64  `json:"p90_ms"`
	P99MS        float64  `json:"p99_ms"`
	MaxMS        float64  `json:"max_ms"`
	SaleP50MS    float64  `json:"sale_p50_ms"`
	SaleP99MS    float64  `json:"sale_p99_ms"`
	ServiceP50MS *float64 `json:"service_p50_ms,omitempty"`
	ServiceP99MS *float64 `json:"service_p99_ms,omitempty"`

	Audit          Audit `json:"audit"`
	Oversold       int   `json:"oversold"`
	Consistent     bool  `json:"consistent"`
	ForeignUnlocks *int  `json:"foreign_unlocks"`

	Stuck      *bool        `json:"stuck,omitempty"`
	RecoveryMS *float64     `json:"recovery_ms,omitempty"`
	Crash      *CrashReport `json:"crash,omitempty"`
	// Payment is the payment step's (payment.go).
	Payment *PaymentReport `json:"payment,omitempty"`
	// Fault is what a failure scenario's fault step saw; MaxHolders the
	// most sales inside the critical section at once (track_holders).
	Fault      *FaultReport `json:"fault,omitempty"`
	MaxHolders *int64       `json:"max_holders,omitempty"`

	// CPU is the cores each component used during the load phase (CPU
	// seconds per wall second); "loadgen" is this process.
	// Trace is the Redis commands of one of the run's sales (TraceSales).
	Trace *SaleTrace         `json:"trace,omitempty"`
	CPU   map[string]float64 `json:"cpu_cores,omitempty"`
	// Shards: on a Redis Cluster, each master's commands and cores in the
	// load phase, busiest first.
	Shards   []ShardLoad   `json:"shards,omitempty"`
	Timeline Timeline      `json:"timeline"`
	Checks   []CheckResult `json:"checks,omitempty"`
}

// Audit is the shop's GET /api/stages/{stage}/audit answer. The shop keeps
// foreign unlocks in Redis next to the stock, so the audit gives the count
// over all replicas; nil when a shop does not report it.
type Audit struct {
	Initial        int  `json:"initial"`
	Stock          int  `json:"stock"`
	Sold           int  `json:"sold"`
	Oversold       int  `json:"oversold"`
	Consistent     bool `json:"consistent"`
	ForeignUnlocks *int `json:"foreign_unlocks"`
	// MaxHolders: with the track_holders fault, the most sales seen inside
	// the critical section at once.
	MaxHolders *int64 `json:"max_holders,omitempty"`
	// Orders are an order stage's orders, duplicates, conflicts and
	// undersold units.
	Orders *inventory.OrderCounts `json:"orders,omitempty"`
	// Stream is an async stage's order stream, read after draining.
	Stream *asyncorders.Stats `json:"stream,omitempty"`
	// Payments are an async stage's payment states, when payments are on.
	Payments *orders.PaymentCounts `json:"payments,omitempty"`
}

// CrashReport is what the crash step saw.
type CrashReport struct {
	Triggered      bool      `json:"triggered"`
	TriggerAnswer  string    `json:"trigger_answer"`
	AtMS           float64   `json:"at_ms"`
	Requests       int       `json:"requests"`
	Sales          int       `json:"sales"`
	Busy           int       `json:"busy"`
	AlreadyBought  int       `json:"already_bought"`
	Errors         int       `json:"errors"`
	ObserveMS      float64   `json:"observe_ms"`
	LockKeys       []LockKey `json:"lock_keys,omitempty"`
	SaleAfterReset *bool     `json:"sale_after_reset,omitempty"`
	// Undersold (order stages) are the units the crash step's sales took
	// that no order holds.
	Undersold *int64 `json:"undersold,omitempty"`
}

// LockKey is a lock key of the stage found in Redis after the crash;
// TTLMS is -1 when the key never expires.
type LockKey struct {
	Key   string `json:"key"`
	TTLMS int64  `json:"ttl_ms"`
}

// Timeline counts answers per time bucket from the start of the stage run,
// by the time each answer arrived, with the events worth marking.
type Timeline struct {
	BucketMS int     `json:"bucket_ms"`
	Sales    []int   `json:"sales"`
	Failures []int   `json:"failures"`
	Events   []Event `json:"events,omitempty"`
	// Oversold is the audit's oversold figure sampled while the load ran.
	Oversold []OversoldSample `json:"oversold,omitempty"`
}

// OversoldSample is the audit's oversold figure at a moment of a stage run.
type OversoldSample struct {
	AtMS     float64 `json:"at_ms"`
	Oversold int     `json:"oversold"`
}

// Event marks a moment of a stage run on its timeline.
type Event struct {
	AtMS  float64 `json:"at_ms"`
	Label string  `json:"label"`
}

// Passed reports whether every expectation of the run held.
func (r *StageRun) Passed() bool {
	for _, c := range r.Checks {
		if !c.Passed {
			return false
		}
	}
	return true
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
func (rep *Report) WriteTable(w io.Writer) error {
	var notes tableNotes
	load := textTable{cols: []column{{"stage", name}, {"replicas", figure}, {"requests", figure}, {"sales", figure},
		{"sold out", figure}, {"busy", figure}, {"errors", figure}, {"sales/s", figure}, {"p50/p99 ms", figure}}}
	shown := textTable{cols: []column{{"stage", name}, {"oversold", figure}, {"consistent", figure},
		{"foreign unlocks", figure}, {"after crash or fault", text}, {"expected", text}}}
	for i := range rep.Stages {
		r := &rep.Stages[i]
		if note := r.notRun(); note != "" {
			status, _, _ := strings.Cut(note, ":")
			load.rows = append(load.rows, []string{r.Heading(), fmt.Sprintf("%s [%d]", status, notes.add(r.Heading()+": "+note)), "", "", "", "", "", "", ""})
			continue
		}
		load.rows = append(load.rows, []string{r.Heading(), fmt.Sprint(r.Replicas), fmt.Sprint(r.Requests), fmt.Sprint(r.Sales),
			fmt.Sprint(r.SoldOut), fmt.Sprint(r.Busy), fmt.Sprint(r.Errors), fmt.Sprintf("%.0f", r.SalesPerSec), fmt.Sprintf("%.1f/%.1f", r.P50MS, r.P99MS)})
		shown.rows = append(shown.rows, []string{r.Heading(), fmt.Sprint(r.Oversold), yesNo(r.Consistent), r.foreignText(), r.CrashSummary(), r.verdict()})
	}
	if err := load.write(w, &notes); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if len(shown.rows) > 0 {
		fmt.Fprintln(w)
		if err := shown.write(w, &notes); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	if err := notes.write(w); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if err := rep.writeShardTable(w); err != nil {
		return err
	}
	if err := rep.writeFaultTable(w); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\nRedis: %s; proxy: %s; %d CPUs; wall time %.1fs\n", rep.Redis, rep.Proxy, rep.Machine.CPUs, rep.WallSeconds); err != nil {
		return err
	}
	if err := rep.writeOrderTable(w); err != nil {
		return err
	}
	return rep.writeStreamTable(w)
}

// writeFaultTable prints, when the scenario had fault steps, what each did
// to its stage.
func (rep *Report) writeFaultTable(w io.Writer) error {
	rows := rep.faultRows()
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nfailure scenarios:")
	// Oversold and consistent are in the results table above.
	table := textTable{cols: []column{{"stage", name}, {"fault", name}, {"time stuck", text}, {"time to recover", figure},
		{"holders", figure}, {"the holder's sale or loss", text}}}
	for _, f := range rows {
		table.rows = append(table.rows, []string{f.Label, f.Kind, f.StuckText, f.RecoveryText, f.HoldersText, f.VictimText})
	}
	var notes tableNotes
	if err := table.write(w, &notes); err != nil {
		return fmt.Errorf("write fault table: %w", err)
	}
	if err := notes.write(w); err != nil {
		return fmt.Errorf("write fault table: %w", err)
	}
	return nil
}

// faultRow is one line of the failure scenarios' table.
type faultRow struct {
	Label, Kind                                      string
	Oversold                                         int
	Consistent                                       bool
	StuckText, RecoveryText, HoldersText, VictimText string
	Notes                                            []string
}

func (rep *Report) faultRows() []faultRow {
	var rows []faultRow
	for i := range rep.Stages {
		r := &rep.Stages[i]
		if r.Fault == nil || r.notRun() != "" {
			continue
		}
		f := r.Fault
		row := faultRow{Label: r.label(), Kind: f.Kind, Oversold: r.Oversold, Consistent: r.Consistent,
			StuckText: fmtMS(f.StuckMS), RecoveryText: "-", HoldersText: "-", VictimText: "-", Notes: f.Notes}
		if f.Stuck {
			row.StuckText = fmt.Sprintf("forever (no sale in %s)", fmtMS(f.WindowMS))
		}
		if f.RecoveryMS != nil {
			row.RecoveryText = fmtMS(*f.RecoveryMS)
		}
		if r.MaxHolders != nil {
			row.HoldersText = fmt.Sprint(*r.MaxHolders)
		}
		if f.VictimAnswer != "" {
			row.VictimText = f.VictimAnswer
			if f.VictimAnswerMS != nil {
				row.VictimText += fmt.Sprintf(" (%s after the fault)", fmtMS(*f.VictimAnswerMS))
			}
		}
		if f.Outage != nil {
			row.VictimText = fmt.Sprintf("%d of %d sales lost", f.Outage.LostSales, f.Outage.SalesAcked)
		}
		rows = append(rows, row)
	}
	return rows
}

// label names the row: its label, or the stage and how it was reached when
// not through the proxy.
func (r *StageRun) label() string {
	if r.Label != "" {
		return r.Label
	}
	if r.Via == plan.ViaOneReplica {
		return r.Stage + " (one replica)"
	}
	return r.Stage
}

// notRun says why the row has no figures, or "" when it has.
func (r *StageRun) notRun() string {
	switch {
	case r.Skipped != "":
		return "skipped: " + r.Skipped
	case r.Error != "":
		return "FAILED: " + r.Error
	}
	return ""
}

func (r *StageRun) foreignText() string {
	if r.ForeignUnlocks == nil {
		return "?"
	}
	return fmt.Sprint(*r.ForeignUnlocks)
}

// CrashSummary says in a few words what happened after the crash step.
func (r *StageRun) CrashSummary() string {
	switch {
	case r.Fault != nil:
		return r.Fault.Kind + ": " + r.Fault.summary()
	case r.Crash == nil:
		return "-"
	case !r.Crash.Triggered:
		return "no crash: " + r.Crash.TriggerAnswer
	case r.Stuck != nil && *r.Stuck:
		return "stuck"
	case r.RecoveryMS != nil:
		return fmt.Sprintf("sells after %.0f ms", *r.RecoveryMS)
	}
	return "?"
}

func (r *StageRun) verdict() string {
	if len(r.Checks) == 0 {
		return "-"
	}
	failed := []string{}
	for _, c := range r.Checks {
		if !c.Passed {
			failed = append(failed, c.Check)
		}
	}
	if len(failed) == 0 {
		return "yes"
	}
	return "NO: " + strings.Join(failed, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
