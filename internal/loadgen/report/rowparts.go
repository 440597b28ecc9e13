package report

import (
	"fmt"
	"slices"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/inventory"
)

// The records a StageRun is composed of, each filled by one part of the
// run; their fields are promoted, so report.json has them flat, as before.

// StageID is the row: which stage, how it was reached, what the shop says of it.
type StageID struct {
	Index int `json:"index"`
	// Label names the row when it is not the stage alone (RunSpec.Label).
	Label     string `json:"label,omitempty"`
	Stage     string `json:"stage"`
	Title     string `json:"title,omitempty"`
	Article   string `json:"article,omitempty"`
	Mechanism string `json:"mechanism,omitempty"`
	Defect    string `json:"defect,omitempty"`
	Via       string `json:"via"`
}

// Drain is an async stage's drain after the load and its stream while it ran (run.go, async.go).
type Drain struct {
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
}

// Status is why a row has no figures, or has only some.
type Status struct {
	// Skipped says why a run did not happen by design (stage unavailable);
	// Error says why it broke off.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Interrupted: the run was stopped (Ctrl-C) during this stage; its
	// figures cover the load until then.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Load is the load shape the row ran under (Replicas: how many answered).
type Load struct {
	Replicas int         `json:"replicas"`
	Rate     string      `json:"rate"`
	Workers  int         `json:"workers"`
	Faults   plan.Faults `json:"faults"`
	// FrontDoor is the limiter and mark the run ran behind (nil: the
	// set-up's own, unchanged).
	FrontDoor *plan.FrontDoor `json:"front_door,omitempty"`
}

func (Load) columns() []resultColumn {
	return []resultColumn{
		{head: "replicas", htmlHead: "replicas", text: func(r *StageRun) string { return fmt.Sprint(r.Replicas) }},
		{head: "front door", htmlHead: "front door", table: frontDoorTable, kind: text, text: func(r *StageRun) string {
			if r.FrontDoor == nil {
				return "-"
			}
			return r.FrontDoor.Describe()
		}, shown: func(rep *Report) bool {
			return slices.ContainsFunc(rep.Stages, func(r StageRun) bool { return r.FrontDoor != nil })
		}},
	}
}

// Answers is the attack's answers, counted (the tally).
type Answers struct {
	Requests int `json:"requests"`
	Sales    int `json:"sales"`
	SoldOut  int `json:"sold_out"`
	Busy     int `json:"busy"`
	// AlreadyBought are an order stage's 409 already_bought answers (a
	// buyer's second purchase refused), not counted in Busy.
	AlreadyBought int `json:"already_bought"`
	// RateLimited are a front door's refusals (429 rate_limited).
	RateLimited    int      `json:"rate_limited,omitempty"`
	Errors         int      `json:"errors"`
	ErrorSamples   []string `json:"error_samples,omitempty"`
	ElapsedMS      float64  `json:"elapsed_ms"`
	SalesPerSec    float64  `json:"sales_per_sec"`
	RequestsPerSec float64  `json:"requests_per_sec"`
}

func (Answers) columns() []resultColumn {
	count := func(head, htmlHead string, n func(*StageRun) int) resultColumn {
		return resultColumn{head: head, htmlHead: htmlHead, text: func(r *StageRun) string { return fmt.Sprint(n(r)) }}
	}
	return []resultColumn{
		count("requests", "requests", func(r *StageRun) int { return r.Requests }),
		count("sales", "sales", func(r *StageRun) int { return r.Sales }),
		count("sold out", "sold-out", func(r *StageRun) int { return r.SoldOut }),
		count("busy", "busy", func(r *StageRun) int { return r.Busy }),
		count("errors", "errors", func(r *StageRun) int { return r.Errors }),
		{head: "sales/s", htmlHead: "sales/s", text: func(r *StageRun) string { return fmt.Sprintf("%.0f", r.SalesPerSec) }},
	}
}

// Latency is the answers' latency quantiles.
type Latency struct {
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
}

// Latency's columns: the terminal puts both quantiles in one.
func (Latency) columns() []resultColumn {
	return []resultColumn{
		{head: "p50/p99 ms", text: func(r *StageRun) string { return fmt.Sprintf("%.1f/%.1f", r.P50MS, r.P99MS) }},
		{htmlHead: "p50 ms", text: func(r *StageRun) string { return fmt.Sprintf("%.1f", r.P50MS) }},
		{htmlHead: "p99 ms", text: func(r *StageRun) string { return fmt.Sprintf("%.1f", r.P99MS) }},
	}
}

// Outcome is the audit after the load and what it shows.
type Outcome struct {
	Audit          Audit `json:"audit"`
	Oversold       int   `json:"oversold"`
	Consistent     bool  `json:"consistent"`
	ForeignUnlocks *int  `json:"foreign_unlocks"`
}

func (Outcome) columns() []resultColumn {
	return []resultColumn{
		{head: "oversold", htmlHead: "oversold", table: shownTable, text: func(r *StageRun) string { return fmt.Sprint(r.Oversold) },
			html: func(r *StageRun) htmlCell { return badIfPositive(r.Oversold) }},
		{head: "consistent", htmlHead: "consistent", table: shownTable, text: func(r *StageRun) string { return yesNo(r.Consistent) },
			html: func(r *StageRun) htmlCell { return yesNoHTML(r.Consistent) }},
		{head: "foreign unlocks", htmlHead: "foreign unlocks", table: shownTable, text: func(r *StageRun) string { return r.foreignText() }},
		orderColumn("duplicate orders", func(o *inventory.OrderCounts) int64 { return o.DuplicateOrders }),
		orderColumn("undersold", func(o *inventory.OrderCounts) int64 { return o.Undersold }),
	}
}

// orderColumn is a count of the audit's orders, in report.html alone (the
// terminal has a table of the orders), where a run sold orders; "-" for a
// stage without them.
func orderColumn(htmlHead string, n func(*inventory.OrderCounts) int64) resultColumn {
	return resultColumn{htmlHead: htmlHead,
		html: func(r *StageRun) htmlCell {
			if r.Audit.Orders == nil {
				return htmlCell{Value: "-"}
			}
			return badIfPositive(n(r.Audit.Orders))
		},
		shown: func(rep *Report) bool {
			return slices.ContainsFunc(rep.Stages, func(r StageRun) bool { return r.Audit.Orders != nil })
		}}
}

// CrashOutcome is the crash step's.
type CrashOutcome struct {
	Stuck      *bool        `json:"stuck,omitempty"`
	RecoveryMS *float64     `json:"recovery_ms,omitempty"`
	Crash      *CrashReport `json:"crash,omitempty"`
}
