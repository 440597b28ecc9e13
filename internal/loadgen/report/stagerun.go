package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// StageRun is one row of the results: one stage under one load shape.
//
// It is composed of the records of the parts that fill it (rowparts.go,
// and the step records below); each embedded record's fields are promoted,
// so the JSON row is flat and its fields keep their order.
type StageRun struct {
	StageID
	Drain
	Status
	Load
	Answers
	Latency
	Outcome
	CrashOutcome
	// Payment is the payment step's (payment.go).
	Payment *PaymentReport `json:"payment,omitempty"`
	// Fault is what a failure scenario's fault step saw; MaxHolders the
	// most sales inside the critical section at once (track_holders).
	Fault      *FaultReport `json:"fault,omitempty"`
	MaxHolders *int64       `json:"max_holders,omitempty"`
	// Spike is a run with bots' two kinds of buyer and its front door.
	Spike *Spike `json:"spike,omitempty"`

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

// resultColumns are the columns rep shows, in order: each record's own (a
// record embedded above lists its columns here).
func resultColumns(rep *Report) []resultColumn {
	all := slices.Concat(Load{}.columns(), Answers{}.columns(), Latency{}.columns(), Outcome{}.columns(), (*Spike)(nil).columns(), stageRunColumns())
	return slices.DeleteFunc(all, func(c resultColumn) bool { return c.shown != nil && !c.shown(rep) })
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

// Name names the row: its label, or the stage and how it was reached when
// not through the proxy.
func (r *StageRun) Name() string {
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

// stageRunColumns are the columns over the whole row: what its crash or
// fault step did, and its checks' verdict.
func stageRunColumns() []resultColumn {
	return []resultColumn{
		{head: "after crash or fault", htmlHead: "after crash or fault", table: shownTable, kind: text, text: (*StageRun).CrashSummary},
		{head: "expected", htmlHead: "as predicted", table: shownTable, kind: text, text: (*StageRun).verdict, html: func(r *StageRun) htmlCell {
			if len(r.Checks) == 0 {
				return htmlCell{Value: "-"}
			}
			return yesNoHTML(r.Passed())
		}},
	}
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

// Heading names the row as the table does: its label, or the stage and
// how it was reached.
func (r *StageRun) Heading() string {
	if r.Interrupted {
		return r.Name() + " (interrupted)"
	}
	return r.Name()
}

// NotRunReason says why the row has no figures, or "" when it has.
func (r *StageRun) NotRunReason() string { return r.notRun() }

// BusiestShare is the busiest master's part of the commands a stage run's
// load phase sent to the masters, and how many masters there were: near 1
// when the stage's keys share one slot, near 1/masters when they spread.
func (r *StageRun) BusiestShare() (share float64, masters int) {
	var total int64
	for _, s := range r.Shards {
		total += s.Commands
	}
	if total == 0 {
		return 0, len(r.Shards)
	}
	return float64(r.Shards[0].Commands) / float64(total), len(r.Shards)
}

// StreamRows are an async stage run's stream lines: the most it reached
// while the load ran, and after the workers drained it (how long, their
// orders/s then, and whether they were held through the load); none for
// another stage.
func (r *StageRun) StreamRows() []StreamRow {
	after := StreamViewOf(r.Audit.Stream)
	if after == nil {
		return nil
	}
	var rows []StreamRow
	if v := r.StreamWhileRunning; v != nil && v.Samples > 0 {
		rows = append(rows, StreamRow{Label: r.Name(), When: fmt.Sprintf("most while running (%d audits)", v.Samples), StreamView: v})
	}
	when := fmt.Sprintf("after draining (%.1f s", r.DrainMS/1000)
	if r.DrainOrdersPerSec > 0 {
		when += fmt.Sprintf(", %.0f orders/s", r.DrainOrdersPerSec)
	}
	if r.WorkersHeld {
		when += "; workers held through the load"
	}
	return append(rows, StreamRow{Label: r.Name(), When: when + ")", StreamView: after})
}

// AfterCrash returns what a crash step, or a crash fault step, saw of the
// stuck lock.
func (r *StageRun) AfterCrash() (keys []LockKey, saleAfterReset *bool) {
	switch {
	case r.Fault != nil:
		return r.Fault.LockKeys, r.Fault.SaleAfterReset
	case r.Crash != nil:
		return r.Crash.LockKeys, r.Crash.SaleAfterReset
	}
	return nil, nil
}

// SummaryLine is the one line printed when a stage run ends.
func (row *StageRun) SummaryLine() string {
	if note := row.notRun(); note != "" {
		return fmt.Sprintf("  %-28s %s", row.Name(), note)
	}
	after := "after crash: " + row.CrashSummary()
	if row.Fault != nil {
		after = row.CrashSummary() // names the fault: "pause: stuck 198 ms, ..."
	}
	return fmt.Sprintf("  %-28s %d replicas  %d sales in %.1fs (%.0f/s)  oversold %d  consistent %s  %s",
		row.Heading(), row.Replicas, row.Sales, row.ElapsedMS/1000, row.SalesPerSec, row.Oversold, yesNo(row.Consistent), after)
}
