package report

import (
	"encoding/json"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/redistrace"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

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

// CheckResult is a check's verdict as the report shows it.
type CheckResult struct {
	Check  string `json:"check"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// PaymentReport is what the payment step saw.
type PaymentReport struct {
	// Stock is the run's; Orders are those listed after the drain, or,
	// during the load, the sales whose answer named an order.
	Stock  int `json:"stock"`
	Orders int `json:"orders"`
	Payers int `json:"payers"`
	// Paid are payments answered 200, Refused 409 order_cancelled, Failed
	// anything else (a 404 still there after the retries too).
	Paid    int `json:"paid"`
	Refused int `json:"refused"`
	Failed  int `json:"failed"`
	// FirstFailure is the first failed payment's error.
	FirstFailure string `json:"first_failure,omitempty"`
	// DuringLoad: the payers paid while the load ran. Then SentDuringLoad are the payers whose first
	// request went before the load's last answer, Late those whose delay
	// was past pay_within, Retried404 the 404s retried (order not written
	// yet).
	DuringLoad     bool `json:"during_load,omitempty"`
	SentDuringLoad int  `json:"sent_during_load,omitempty"`
	Late           int  `json:"late,omitempty"`
	Retried404     int  `json:"retried_404,omitempty"`
	// LiveUnits and Remaining are the audit's after the sweep.
	LiveUnits int64 `json:"live_units"`
	Remaining int   `json:"remaining"`
	// Resold are the given-back units sold again after the sweep.
	Resold int `json:"resold"`
}

// ShardLoad is what one master of a Redis Cluster did during a stage run's
// load phase: the commands it processed (INFO's total_commands_processed,
// which counts the commands scripts run too) and the cores it used (its
// own used_cpu_sys + used_cpu_user per wall second).
type ShardLoad struct {
	Addr     string  `json:"addr"`
	Commands int64   `json:"commands"`
	Cores    float64 `json:"cores"`
	// Segments are the SKU's segments whose keys this master holds (the
	// stages that split the stock).
	Segments []int `json:"segments,omitempty"`
}

// SaleTrace is the Redis commands of one sale of a stage run, as the
// replica that sold it recorded them (POST /api/stages/{stage}/trace).
type SaleTrace struct {
	Replica string `json:"replica"`
	// Sold is false when no sale was traced, only an attempt.
	Sold       bool              `json:"sold"`
	Status     int               `json:"status"`
	Answer     json.RawMessage   `json:"answer"`
	RoundTrips int               `json:"round_trips"`
	Calls      []redistrace.Call `json:"calls"`
	// Shows lists what this sale shows of its lock: "acquire", "release",
	// "renewal", "walked past a segment".
	Shows []string `json:"shows,omitempty"`
}

// Machine describes where the figures were measured.
type Machine struct {
	Hostname  string `json:"hostname"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Kernel    string `json:"kernel,omitempty"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	MemoryMiB int    `json:"memory_mib,omitempty"`
	GoVersion string `json:"go_version"`
}

// StreamView is an async stage's order stream in the units the report and
// the live page show.
type StreamView struct {
	Length         int64   `json:"length"`
	Undelivered    int64   `json:"undelivered"`
	Pending        int64   `json:"pending"`
	OldestPendingS float64 `json:"oldest_pending_s"`
	DeadLetters    int64   `json:"dead_letters"`
	LagP50MS       float64 `json:"lag_p50_ms"`
	LagP99MS       float64 `json:"lag_p99_ms"`
	// Samples is how many audits a most-seen view took its figures from.
	Samples int `json:"samples,omitempty"`
}

// StreamRow is a line of an order stream table: a stage, when its stream
// was read, and the figures then.
type StreamRow struct {
	Label, When string
	*StreamView
}

// StreamViewOf is s as the pages show it; nil for a stage without a stream.
func StreamViewOf(s *asyncorders.Stats) *StreamView {
	if s == nil {
		return nil
	}
	return &StreamView{Length: s.Length, Undelivered: s.Undelivered, Pending: s.Pending, OldestPendingS: s.OldestPending.Seconds(),
		DeadLetters: s.DeadLetters, LagP50MS: msOf(s.LagP50), LagP99MS: msOf(s.LagP99)}
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Most keeps, figure by figure, the most of v and s: what an async stage's
// stream reached while its load ran (read from the audits polled then).
func (v *StreamView) Most(s *asyncorders.Stats) {
	if v == nil || s == nil {
		return
	}
	now := StreamViewOf(s)
	v.Length, v.Undelivered, v.Pending = max(v.Length, now.Length), max(v.Undelivered, now.Undelivered), max(v.Pending, now.Pending)
	v.OldestPendingS, v.DeadLetters = max(v.OldestPendingS, now.OldestPendingS), max(v.DeadLetters, now.DeadLetters)
	v.LagP50MS, v.LagP99MS = max(v.LagP50MS, now.LagP50MS), max(v.LagP99MS, now.LagP99MS)
	v.Samples++
}

// Returning are the units of orders a sweeper cancelled that are not back
// on sale yet.
func (a Audit) Returning() int64 {
	if a.Orders == nil {
		return 0
	}
	return a.Orders.Returning
}

// MS is d in milliseconds, as the records keep times.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
